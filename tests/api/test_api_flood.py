"""Against a real `mantle serve` (gunicorn, several worker processes) on a free local port:
webhook floods, the idempotency race, and metrics summed across processes."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from executions.models import Execution, Status
from teams.models import Team
from tests.api.conftest import hook_yaml
from tests.concurrency.harness import Sampler
from tests.factories import ApiKeyFactory
from tests.processes import scrape
from workflows.services import workflow_apply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FLOOD = 200
CLIENT_THREADS = 32
LIMIT = 3


def post_concurrently(
    urls_and_headers: list[tuple[str, dict[str, str]]], body: dict | None = None
) -> tuple[list, float]:
    """All requests from CLIENT_THREADS threads released together; (responses, seconds)."""
    threads = min(CLIENT_THREADS, len(urls_and_headers))
    barrier = threading.Barrier(threads)
    local = threading.local()

    def post(item: tuple[str, dict[str, str]]) -> httpx.Response:
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=60)
            barrier.wait(timeout=30)
        url, headers = item
        return local.client.post(url, json=body or {}, headers=headers)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        # Every thread takes one request first (and waits at the barrier), then the rest.
        started = time.monotonic()
        responses = list(pool.map(post, urls_and_headers))
        elapsed = time.monotonic() - started
    return responses, elapsed


def report(message: str) -> None:
    print(f"\n[flood] {message}", file=sys.stderr)


def test_a_queue_flood_admits_all_holds_3_slots_and_queues_the_rest_in_order(team: Team, serve):
    workflow = workflow_apply(
        team=team, content=hook_yaml("flood", "/hooks/flood", limit=LIMIT)
    ).workflow
    server = serve()
    sampler = Sampler(team.id)
    sampler.start()
    try:
        responses, elapsed = post_concurrently(
            [(f"{server.url}/hooks/flood", {})] * FLOOD, body={"ref": "main"}
        )
    finally:
        sampler.stop()
    assert Counter(r.status_code for r in responses) == {202: FLOOD}
    assert sampler.samples > 0
    assert sampler.max_per_workflow.get(workflow.id, 0) <= LIMIT
    bodies = [r.json() for r in responses]
    assert Counter(b["status"] for b in bodies) == {"pending": LIMIT, "queued": FLOOD - LIMIT}
    # In order: the position each request was told is its place in the FIFO queue now.
    queue = Execution.objects.filter(workflow=workflow, status=Status.QUEUED).order_by(
        "created_at", "id"
    )
    told = {b["execution_id"]: b["queue_position"] for b in bodies if b["status"] == "queued"}
    assert [told[str(e.id)] for e in queue] == list(range(1, FLOOD - LIMIT + 1))
    assert server.metric("mantle_executions_queued", workflow="flood") == FLOOD - LIMIT
    assert server.metric("mantle_executions_running", workflow="flood") == LIMIT
    report(
        f"queue: {FLOOD / elapsed:.0f} requests/s ({FLOOD} in {elapsed:.2f}s), "
        f"max slot holders seen {sampler.max_per_workflow.get(workflow.id, 0)} "
        f"in {sampler.samples} samples, mantle_executions_queued {FLOOD - LIMIT}, "
        f"mantle_executions_running {LIMIT}"
    )


def test_a_reject_flood_429s_exactly_the_excess_and_counts_them(team: Team, serve):
    workflow = workflow_apply(
        team=team, content=hook_yaml("burst", "/hooks/burst", limit=LIMIT, on_limit="reject")
    ).workflow
    server = serve()
    labels = {"team": team.slug, "workflow": "burst", "scope": "workflow"}
    before = server.metric("mantle_executions_rejected_total", **labels)
    responses, elapsed = post_concurrently([(f"{server.url}/hooks/burst", {})] * FLOOD)
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {202: LIMIT, 429: FLOOD - LIMIT}
    assert all(
        r.json() | {"detail": ""}
        == {"error": "concurrency_limit", "detail": "", "scope": "workflow", "limit": LIMIT}
        and "retry-after" not in r.headers
        for r in responses
        if r.status_code == 429
    )
    assert Execution.objects.filter(workflow=workflow).count() == LIMIT
    rejected = server.metric("mantle_executions_rejected_total", **labels) - before
    assert rejected == statuses[429]
    report(
        f"reject: {FLOOD / elapsed:.0f} requests/s, {statuses[202]} x 202, "
        f"{statuses[429]} x 429, mantle_executions_rejected_total {rejected:.0f}"
    )


def test_twenty_racing_requests_with_one_idempotency_key_admit_one_execution(
    team: Team, make_workflow, serve
):
    make_workflow(team, limit=1)
    _, key = ApiKeyFactory(team=team)
    server = serve()
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "race-1"}
    responses, _ = post_concurrently([(f"{server.url}/api/v1/run/deploy", headers)] * 20)
    assert Counter(r.status_code for r in responses) == {202: 1, 200: 19}
    assert len({r.json()["execution_id"] for r in responses}) == 1
    assert Execution.objects.count() == 1


def test_one_scrape_sums_web_and_worker_processes(team: Team, make_workflow, serve):
    """A rejection counted by a gunicorn worker, terminal executions, promotions and queue waits
    counted by django-q2 worker processes: all in one scrape of the web app."""
    make_workflow(team, "queued", limit=1, steps=sleep(1))
    make_workflow(team, "rejecting", limit=1, on_limit="reject", steps=sleep(3))
    _, key = ApiKeyFactory(team=team)
    server = serve(web_only=False, workers=2)
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"})
    answers = [client.post("/api/v1/run/queued") for _ in range(3)]
    assert [a.status_code for a in answers] == [202] * 3
    # A slow request may find its predecessor already finished: what waited is what was queued.
    queued = sum(a.json()["status"] == "queued" for a in answers)
    assert queued >= 1
    assert client.post("/api/v1/run/rejecting").status_code == 202
    assert client.post("/api/v1/run/rejecting").status_code == 429
    slug = team.slug
    expected = {
        ("mantle_executions_rejected_total", ("team", slug), ("scope", "workflow")): 1,
        ("mantle_executions_total", ("workflow", "queued"), ("status", "completed")): 3,
        ("mantle_queue_wait_duration_seconds_count", ("workflow", "queued")): queued,
        ("mantle_executions_queued", ("workflow", "queued")): 0,
    }

    def observed() -> dict[tuple, float]:
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        seen = {key: scrape(text, key[0], **dict(key[1:])) for key in expected}
        seen["promotions"] = scrape(text, "mantle_promotions_total")
        return seen

    # Terminal and promotion counters are written just after their commits: poll the scrape.
    deadline = time.monotonic() + 60
    seen = observed()
    while time.monotonic() < deadline and not (
        all(seen[key] == value for key, value in expected.items()) and seen["promotions"] >= queued
    ):
        time.sleep(0.2)
        seen = observed()
    assert {key: seen[key] for key in expected} == expected
    assert seen["promotions"] >= queued


def sleep(seconds: int) -> str:
    return f"  - name: nap\n    action: test/sleep\n    params:\n      seconds: {seconds}\n"
