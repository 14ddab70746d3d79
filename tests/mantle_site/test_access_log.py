"""The web workers' access log (server.access_log): off by default, as gunicorn's own default,
one line per request on `mantle serve`'s standard output when on."""

from __future__ import annotations

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("setting", [None, "true"])
def test_requests_are_logged_only_when_the_access_log_is_on(serve, setting: str | None) -> None:
    env = {"MANTLE_SERVER_ACCESS_LOG": setting} if setting else {}
    server = serve(workers=1, env=env)
    assert httpx.get(f"{server.url}/healthz?probe=access-log", timeout=10).status_code == 200
    server.stop()
    logged = '"GET /healthz?probe=access-log HTTP/1.1" 200' in server.log.read_text()
    assert logged == (setting == "true")
