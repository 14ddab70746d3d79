"""Workflow uploads are validated one at a time per team (docs/hostile-input.md, Workflow
uploads): a 1 MiB document of 27,000 steps takes seconds to refuse, and four at once held every
web worker. The others are answered 429 `upload_in_progress` at once."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from core import locks
from teams.models import Team
from tests.api.conftest import client_of
from tests.concurrency.harness import run_in_threads
from tests.factories import ApiKeyFactory

pytestmark = pytest.mark.django_db(transaction=True)

UPLOADS = 4
# About 1 MiB: 27,000 steps, far over limits.workflow_steps, refused only once it is parsed.
HUGE = "name: huge\nsteps:\n" + "".join(
    f"  - {{name: s{i:05d}, action: test/noop}}\n" for i in range(27_000)
)
YAML = {"content_type": "application/yaml"}


@contextlib.contextmanager
def upload_lock_held(team: Team) -> Iterator[None]:
    """The team's upload lock, held by a transaction on another connection for the block."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                assert locks.try_lock(locks.Namespace.WORKFLOW_UPLOAD, team.id)
                taken.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(timeout=10)
        yield
    finally:
        release.set()
        holder.join(timeout=10)


def outcomes(team: Team) -> Counter[tuple[int, str]]:
    """UPLOADS uploads of the team at once (threads, each its own connection): their (status,
    error code)."""
    clients: list[APIClient] = [client_of(team) for _ in range(UPLOADS)]

    def upload(client: APIClient) -> tuple[int, str]:
        response = client.put("/api/v1/workflows/huge", HUGE, **YAML)
        return response.status_code, response.json()["error"]

    results = run_in_threads([lambda c=c: upload(c) for c in clients], threads=UPLOADS)
    return Counter(results)  # type: ignore[arg-type]


def test_a_teams_uploads_at_once_are_validated_one_at_a_time(team: Team) -> None:
    found = outcomes(team)
    assert found[(429, "upload_in_progress")] >= 1
    assert found[(400, "invalid_workflow")] < UPLOADS
    assert set(found) <= {(429, "upload_in_progress"), (400, "invalid_workflow")}


def test_without_the_lock_every_upload_is_validated_at_once(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutant the test above must catch: uploads that never try the team's lock."""
    monkeypatch.setattr(locks, "try_lock", lambda *args, **kwargs: True)
    assert outcomes(team) == Counter({(400, "invalid_workflow"): UPLOADS})


def test_another_teams_upload_is_not_held_back(team: Team, other_team: Team) -> None:
    with upload_lock_held(team):
        response = client_of(other_team).put(
            "/api/v1/workflows/w", "name: w\nsteps:\n  - {name: a, action: test/noop}\n", **YAML
        )
        assert response.status_code == 201, response.content
        blocked = client_of(team).put("/api/v1/workflows/w", "name: w\n", **YAML)
        assert (blocked.status_code, blocked.json()["error"]) == (429, "upload_in_progress")


@pytest.mark.slow
def test_four_huge_uploads_leave_healthz_answering(team: Team, serve) -> None:
    _, key = ApiKeyFactory(team=team)
    server = serve(workers=2)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/yaml"}
    statuses: list[int] = []

    def upload() -> None:
        response = httpx.put(
            f"{server.url}/api/v1/workflows/huge", content=HUGE, headers=headers, timeout=120
        )
        statuses.append(response.status_code)

    uploads = [threading.Thread(target=upload) for _ in range(UPLOADS)]
    for thread in uploads:
        thread.start()
    healthz = []
    # A client timeout far above the 1 s goal: httpx raises when it passes.
    with httpx.Client(base_url=server.url, timeout=5) as client:
        while any(thread.is_alive() for thread in uploads):
            healthz.append(client.get("/healthz").status_code)
    for thread in uploads:
        thread.join()
    assert len(statuses) == UPLOADS and 429 in statuses and set(statuses) <= {400, 429}
    assert healthz and set(healthz) == {200}
