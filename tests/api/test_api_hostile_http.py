"""Hostile HTTP against a real `mantle serve` (gunicorn in front of Django): what only a real
server shows — chunked bodies, oversized request lines and headers, worker timeouts."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from django.db import connection, transaction

from executions.models import Execution
from teams.models import Team
from tests.api.conftest import hook_yaml, sign
from tests.factories import ApiKeyFactory, workflow_yaml
from workflows.services import workflow_apply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def chunks(body: bytes, size: int = 1000) -> Iterator[bytes]:
    """An iterator body: httpx sends it with Transfer-Encoding: chunked, no Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_chunked_bodies_are_read_whole_capped_and_signed_as_read(team: Team, serve) -> None:
    workflow_apply(team=team, content=hook_yaml("signed", "/hooks/signed", secret="s3cret"))
    inputs = "inputs:\n  ref: {type: string, default: none}\n"
    workflow_apply(team=team, content=workflow_yaml("run", extra=inputs))
    _, key = ApiKeyFactory(team=team)
    server = serve()
    body = b'{"ref": "main", "pad": "' + b"x" * 5000 + b'"}'
    with httpx.Client(base_url=server.url, timeout=30) as client:
        unsigned = client.post(
            "/hooks/signed",
            content=chunks(body),
            headers={"X-Hub-Signature-256": sign(b"", "s3cret")},
        )
        assert (unsigned.status_code, unsigned.json()["error"]) == (403, "bad_signature")
        signed = client.post(
            "/hooks/signed",
            content=chunks(body),
            headers={"X-Hub-Signature-256": sign(body, "s3cret")},
        )
        assert signed.status_code == 202, signed.text
        run = client.post(
            "/api/v1/run/run",
            content=chunks(b'{"inputs": {"ref": "v2"}}', size=5),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        assert run.status_code == 202, run.text
        huge = client.post("/hooks/signed", content=chunks(b"x" * (1024 * 1024 + 1), 65536))
        assert huge.status_code == 413
        assert huge.json()["error"] == "payload_too_large"
    hook_execution = Execution.objects.get(id=signed.json()["execution_id"])
    assert hook_execution.trigger["payload"]["ref"] == "main"
    assert Execution.objects.get(id=run.json()["execution_id"]).inputs == {"ref": "v2"}
    assert Execution.objects.count() == 2


def test_a_worker_serves_the_next_client_while_the_last_one_keeps_its_connection_open(
    team: Team, serve
) -> None:
    server = serve(workers=1)
    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as last:
        last.sendall(b"GET /healthz HTTP/1.1\r\nHost: mantle\r\n\r\n")
        answer = b""
        while chunk := last.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 ")
        # `last` has not closed its end: gunicorn's graceful close would keep the only worker
        # waiting for its FIN for 2 s.
        started = time.monotonic()
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        assert time.monotonic() - started < 1.5


def test_gunicorns_own_refusals_are_json(team: Team, serve) -> None:
    server = serve(workers=1)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        long_url = client.get("/api/v1/workflows/" + "a" * 9000)
        many_headers = client.get("/healthz", headers={f"X-H{n}": "v" for n in range(120)})
        big_header = client.get("/healthz", headers={"X-Big": "v" * 9000})
    assert (long_url.status_code, long_url.json()["error"]) == (414, "uri_too_long")
    for response in (many_headers, big_header):
        assert response.status_code == 431
        assert response.json()["error"] == "request_header_fields_too_large"


def test_a_request_stopped_at_the_worker_timeout_is_answered_in_json(team: Team, serve) -> None:
    _, key = ApiKeyFactory(team=team)
    server = serve(workers=1, env={"GUNICORN_CMD_ARGS": "--timeout 2"})
    # The workflows table locked by another transaction: reading it waits past the timeout.
    with connection.cursor() as cursor, transaction.atomic():
        cursor.execute("LOCK TABLE workflows_workflowdefinition IN ACCESS EXCLUSIVE MODE")
        response = httpx.get(
            f"{server.url}/api/v1/workflows",
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
    assert response.status_code == 503
    assert response.json() == {
        "error": "request_timeout",
        "detail": "the request ran longer than 2s and was stopped",
    }
