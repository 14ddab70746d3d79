"""One hot team flooded at ten times its capacity, against a real `mantle serve`.

Capacity, concretely: a team admits one execution at a time (its advisory lock serialises
admissions), so ten closed-loop clients posting to its webhook without pause are ten times what
it can serve at once. In the middle of the flood a transaction holds the team's lock for
HOLD seconds (a stuck promotion or admin transaction: the head of a pile-up). The server has
more gunicorn workers than hot clients, so what is measured is the database's isolation of teams,
not the size of a worker pool that one team could fill.

Catches (checked by breaking copies of the code): admission waiting on its team's lock without
`lock_timeout` (the hot requests pile up for the whole hold instead of answering 503 `busy`
after LOCK_TIMEOUT), and locks shared across teams (a global or colliding key: the second team
then waits behind the hot team's holder and its latency explodes).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable

import httpx
import pytest
from django.db import connections, transaction

from core import locks
from executions.models import SLOT_HOLDING, Execution, Status
from executions.services import promotion
from executions.services.admission import execution_admit
from teams.models import Team
from tests.api.conftest import client_of, hook_yaml
from tests.faults.flood import Flood, Result, latencies, post
from tests.processes import Server
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOT_CLIENTS = 10
HOLD = 5.0  # seconds the hot team's lock is held: two lock_timeouts and then some
LOCK_TIMEOUT = locks.LOCK_TIMEOUT_MS / 1000


def hold_team_lock(team: Team, held: threading.Event, seconds: float) -> None:
    try:
        with transaction.atomic():
            locks.lock_team(team.id)
            held.set()
            time.sleep(seconds)
    finally:
        connections.close_all()


def test_a_flooded_team_answers_busy_after_a_bounded_wait_and_other_teams_do_not_notice(
    make_team: Callable[..., Team], serve: Callable[..., Server]
) -> None:
    hot, cold = make_team("hot", max_concurrent_executions=1), make_team("cold")
    workflow_apply(team=hot, content=hook_yaml("hot", "/hooks/hot"))
    workflow_apply(team=cold, content=hook_yaml("cold", "/hooks/cold"))
    server = serve(workers=HOT_CLIENTS + 3)
    cold_client = httpx.Client(timeout=10)
    cold_url = f"{server.url}/hooks/cold"
    # Unloaded: before the flood and after it (the machine's other load drifts meanwhile).
    unloaded = latencies(cold_client, cold_url, seconds=1)

    def hot_request(client: httpx.Client, n: int) -> Result:
        return post(client, f"{server.url}/hooks/hot")

    held = threading.Event()
    holder = threading.Thread(target=hold_team_lock, args=(hot, held, HOLD))
    with Flood(HOT_CLIENTS, hot_request) as flood:
        time.sleep(1)
        holder.start()
        assert held.wait(timeout=10)
        hold_started = time.monotonic()
        during_hold = latencies(cold_client, cold_url, seconds=HOLD - 1)
        holder.join(timeout=HOLD + 5)
        released = time.monotonic()
        time.sleep(1.5)
    unloaded += latencies(cold_client, cold_url, seconds=1)
    cold_client.close()
    loaded, unloaded = statistics.median(during_hold), statistics.median(unloaded)

    results = flood.results
    statuses = Counter(r.status for r in results)
    busy = [r for r in results if r.status == 503]
    during = [r for r in results if hold_started <= r.started < released - LOCK_TIMEOUT]
    waits = sorted(r.seconds for r in busy) or [float("nan")]
    print(
        f"\n[faults] hot team x{HOT_CLIENTS} clients, lock held {HOLD}s: {dict(statuses)}, "
        f"busy answered in {waits[0]:.2f}-{waits[-1]:.2f}s; cold team median "
        f"{unloaded * 1000:.1f} ms unloaded, {loaded * 1000:.1f} ms loaded "
        f"({len(during_hold)} requests during the hold)"
    )
    assert set(statuses) <= {202, 503}, [r for r in results if r.status not in (202, 503)]
    assert all(
        r.body["error"] == "busy" and r.body["detail"] and r.headers["Retry-After"] for r in busy
    )
    # Bounded: every request blocked by the holder gave up after lock_timeout, none waited it out.
    assert during and all(r.status == 503 for r in during)
    assert len(busy) >= HOT_CLIENTS
    assert all(r.started + r.seconds < released for r in during)  # answered, not waited out
    assert all(r.seconds > LOCK_TIMEOUT - 0.1 for r in busy)
    # Admission resumed once the holder let go; the hot team's limit held.
    assert any(r.status == 202 and r.started > released for r in results)
    assert Execution.objects.filter(workflow__team=hot, status__in=SLOT_HOLDING).count() == 1
    # The other team did not wait behind the hot team's lock.
    assert loaded <= 2 * unloaded


def test_a_cancel_committed_while_its_teams_lock_is_busy_answers_200_and_the_poller_promotes(
    team: Team, make_workflow: Callable[..., WorkflowDefinition]
) -> None:
    """The promotion after a committed transition may find the team's lock busy past
    lock_timeout: the transition stands (no 503 for a cancel that happened), the queue waits
    for the backup poller."""
    workflow = make_workflow(team, limit=1)
    running = execution_admit(team=team, workflow=workflow).execution
    waiting = execution_admit(team=team, workflow=workflow).execution
    held = threading.Event()
    holder = threading.Thread(target=hold_team_lock, args=(team, held, LOCK_TIMEOUT + 1))
    holder.start()
    try:
        assert held.wait(timeout=10)
        response = client_of(team).post(f"/api/v1/executions/{running.id}/cancel")
    finally:
        holder.join(timeout=LOCK_TIMEOUT + 5)
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "cancelled"
    waiting.refresh_from_db()
    assert waiting.status == Status.QUEUED
    assert promotion.queue_promote_all(trigger="poller") == 1
    waiting.refresh_from_db()
    assert waiting.status == Status.PENDING
