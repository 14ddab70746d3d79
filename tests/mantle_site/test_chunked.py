"""The chunked-body wrapper of the WSGI app where no real server reaches it: a server that does
not say the input ends by itself (wsgiref, `runserver`) gets 411, never an empty body."""

from __future__ import annotations

import io
import json
from typing import Any

from mantle_site.chunked import read_chunked_bodies


def call(environ: dict[str, Any]) -> tuple[str, bytes, list[bytes]]:
    seen: list[bytes] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
        start_response("200 OK", [])
        return [b""]

    statuses: list[str] = []
    body = b"".join(read_chunked_bodies(app)(environ, lambda s, h: statuses.append(s)))
    return statuses[0], body, seen


def chunked(**extra: Any) -> dict[str, Any]:
    return {"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": io.BytesIO(b'{"a": 1}'), **extra}


def test_without_input_terminated_a_chunked_body_is_411_not_empty() -> None:
    status, body, seen = call(chunked())
    assert status.startswith("411")
    assert json.loads(body)["error"] == "length_required"
    assert seen == []


def test_with_input_terminated_the_app_reads_the_whole_body() -> None:
    status, _body, seen = call(chunked(**{"wsgi.input_terminated": True}))
    assert (status, seen) == ("200 OK", [b'{"a": 1}'])
