"""Request bodies without a Content-Length (`Transfer-Encoding: chunked`), around the WSGI app.

Django reads CONTENT_LENGTH bytes of wsgi.input, so it sees such a body as empty: a webhook would
be admitted without its payload, its signature checked against b"", and the 1 MiB cap never
applied. When the server says the input ends by itself (`wsgi.input_terminated`, as gunicorn
does), the body is read here, up to the upload cap, and handed to Django with its length; a
larger one is 413, and 411 when the server cannot say where the body ends."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def read_chunked_bodies(app: WsgiApp) -> WsgiApp:
    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not environ.get("CONTENT_LENGTH"):
            if not environ.get("wsgi.input_terminated"):
                detail = "a body without Content-Length cannot be read here: send Content-Length"
                return _error(start_response, "411 Length Required", "length_required", detail)
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            body = environ["wsgi.input"].read(limit + 1)
            if len(body) > limit:
                detail = f"the request body exceeds {limit} bytes"
                return _error(start_response, "413 Content Too Large", "payload_too_large", detail)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return application


def _error(start_response: Callable[..., Any], status: str, code: str, detail: str) -> list[bytes]:
    body = json.dumps({"error": code, "detail": detail}).encode()  # api.errors' shape
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]
