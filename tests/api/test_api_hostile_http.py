"""Hostile HTTP against a real `mantle serve` (gunicorn in front of Django): what only a real
server shows — chunked bodies, oversized request lines and headers, worker timeouts."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator

import httpx
import pytest

from executions.models import Execution
from teams.models import Team
from teams.services import api_key_create
from tests.api.conftest import hook_yaml
from tests.conftest import workflow_yaml
from workflows.services import workflow_apply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def chunks(body: bytes, size: int = 1000) -> Iterator[bytes]:
    """An iterator body: httpx sends it with Transfer-Encoding: chunked, no Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_chunked_bodies_are_read_whole_capped_and_signed_as_read(team: Team, serve) -> None:
    workflow_apply(team=team, content=hook_yaml("signed", "/hooks/signed", secret="s3cret"))
    inputs = "inputs:\n  ref: {type: string, default: none}\n"
    workflow_apply(team=team, content=workflow_yaml("run", extra=inputs))
    _, key = api_key_create(team=team)
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
