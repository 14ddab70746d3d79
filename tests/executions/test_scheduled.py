"""Delayed runs (docs/operations.md, Delayed runs): `scheduled` until their time, holding no slot
and counted nowhere, visible and cancellable, then admitted through admission by the engine
clock, once, whatever happens to the clock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import DatabaseError, IntegrityError
from django.utils import timezone

from engine import clock
from executions.models import Execution, Status
from executions.services import scheduled
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_cancel
from executions.services.pauses import workflow_pause_set
from executions.services.scheduled import (
    execution_schedule,
    run_time,
    scheduled_admit_due,
    scheduled_next_due,
)
from executions.sql import queries
from tests.api.conftest import client_of
from tests.commands import exit_code, run
from tests.concurrency.harness import run_in_threads
from tests.processes import CONFIG, ROOT, database_url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(team):
    return client_of(team)


def due_now(team, workflow, count: int = 1, **kwargs) -> list[Execution]:
    run_at = timezone.now() - timedelta(seconds=1)
    return [
        execution_schedule(team=team, workflow=workflow, run_at=run_at, **kwargs)
        for _ in range(count)
    ]


def test_a_delayed_run_holds_nothing_until_it_is_due(api, team, make_workflow):
    workflow = make_workflow(team, limit=1)
    later = api.post("/api/v1/run/deploy", {"delay": "10m"}, format="json")
    assert later.status_code == 202
    body = later.json()
    assert (body["status"], body["blocked_by"], body["queue_position"]) == ("scheduled", None, None)
    assert body["run_at"] is not None
    # Counted nowhere: the one slot is free for a run now.
    assert execution_admit(team=team, workflow=workflow).status == "pending"
    queues = api.get("/api/v1/queues").json()
    assert (queues["running"], queues["queued"]) == (1, 0)
    detail = api.get(f"/api/v1/executions/{body['execution_id']}").json()
    assert (detail["status"], detail["run_at"]) == ("scheduled", detail["run_at"])
    assert scheduled_admit_due() == 0  # not due yet


def test_a_due_run_is_admitted_with_its_id_through_the_limits(team, make_workflow):
    workflow = make_workflow(team, limit=1)
    first, second = due_now(team, workflow, 2, inputs={}, idempotency_key=None)
    assert scheduled_admit_due() == 2
    admitted = {e.id: e for e in Execution.objects.all()}
    assert set(admitted) == {first.id, second.id}
    assert [admitted[first.id].status, admitted[second.id].status] == ["pending", "queued"]
    assert admitted[second.id].run_at == second.run_at
    assert scheduled_admit_due() == 0


def test_the_clock_looks_again_when_the_next_run_falls_due(team, make_workflow, monkeypatch):
    monkeypatch.setattr(clock, "RESOLUTION", 60.0)  # a tick takes far less, however loaded
    workflow = make_workflow(team)
    assert scheduled_next_due() is None
    assert clock.tick({}) == 60.0
    execution_schedule(team=team, workflow=workflow, run_at=timezone.now() + timedelta(seconds=30))
    assert 20 < scheduled_next_due() <= 30
    assert 20 < clock.tick({}) <= 30  # at its time, not a look later
    execution_schedule(team=team, workflow=workflow, run_at=timezone.now() - timedelta(hours=1))
    assert scheduled_next_due() == 0  # one is due now


def test_a_cancelled_delayed_run_never_runs(team, make_workflow):
    workflow = make_workflow(team)
    (run_,) = due_now(team, workflow)
    execution_cancel(run_.id)
    assert scheduled_admit_due() == 0
    assert Execution.objects.get().status == "cancelled"


def test_a_run_rejected_when_due_fails_with_the_reason(team, make_workflow):
    workflow = make_workflow(team, extra="on_pause: reject\n")
    (run_,) = due_now(team, workflow)
    workflow_pause_set(workflow=workflow, paused=True)
    assert scheduled_admit_due() == 1
    failed = Execution.objects.get(id=run_.id)
    assert failed.status == "failed"
    assert failed.error.startswith("rejected when due: paused")


def racing_clocks(team, workflow, runs: int) -> tuple[list[Execution], int, list[Exception]]:
    """4 clocks admitting the same due runs at once, in batches of 10: what each handled in all,
    and the errors they died of."""
    due = due_now(team, workflow, runs)
    errors: list[Exception] = []

    def clock() -> int:
        try:
            return scheduled_admit_due()
        except DatabaseError as error:
            errors.append(error)
            return 0

    handled = run_in_threads([clock] * 4, threads=4)
    return due, sum(handled), errors  # type: ignore[arg-type]


def test_racing_clocks_admit_each_due_run_once(team, make_workflow, monkeypatch):
    monkeypatch.setattr(scheduled, "BATCH", 10)
    workflow = make_workflow(team, limit=5)
    due, handled, errors = racing_clocks(team, workflow, 120)
    assert (handled, errors) == (120, [])
    assert Execution.objects.count() == 120
    assert set(Execution.objects.values_list("id", flat=True)) == {e.id for e in due}
    assert not Execution.objects.filter(status=Status.SCHEDULED).exists()
    assert Execution.objects.filter(status=Status.PENDING).count() == 5
    assert all(e.run_at is not None for e in Execution.objects.all())


def test_without_the_batch_row_locks_racing_clocks_take_the_same_runs(
    team, make_workflow, monkeypatch
):
    """The lockless mutant: clocks that read a due batch without locking it take the same runs,
    and all but one die on runs another admitted: their ids taken, or no longer scheduled."""
    monkeypatch.setattr(scheduled, "BATCH", 10)
    lockless = queries["scheduled_due_lock"].replace("FOR UPDATE OF e SKIP LOCKED", "")
    monkeypatch.setitem(queries, "scheduled_due_lock", lockless)
    workflow = make_workflow(team, limit=5)
    _, _, errors = racing_clocks(team, workflow, 120)
    assert errors and all(
        isinstance(error, IntegrityError) or "no longer scheduled" in str(error) for error in errors
    )


def start_clock(log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **CONFIG, "DATABASE_URL": database_url()}
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "manage.py", "mantle_clock"],
            env=env,
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_clock_killed_and_restarted_admits_the_overdue_runs_once(team, make_workflow, tmp_path):
    workflow = make_workflow(team)
    log = tmp_path / "clock.log"
    clock = start_clock(log)
    try:
        soon = execution_schedule(
            team=team, workflow=workflow, run_at=timezone.now() + timedelta(seconds=1)
        )
        wait_until(lambda: Execution.objects.get(id=soon.id).status != "scheduled")
        admitted = Execution.objects.get(id=soon.id)
        assert admitted.status == "pending" and admitted.pending_at >= soon.run_at
        os.killpg(clock.pid, signal.SIGKILL)
        clock.wait(timeout=10)
        overdue = due_now(team, workflow, 30)
        time.sleep(0.5)
        assert Execution.objects.filter(status=Status.SCHEDULED).count() == 30
        clock = start_clock(log)
        wait_until(lambda: not Execution.objects.filter(status=Status.SCHEDULED).exists())
        time.sleep(0.5)  # a few more ticks: nothing admitted twice
        ids = list(Execution.objects.values_list("id", flat=True))
        assert len(ids) == 31 == len(set(ids))
        assert set(ids) == {soon.id, *(e.id for e in overdue)}
    finally:
        if clock.poll() is None:
            os.killpg(clock.pid, signal.SIGTERM)
            clock.wait(timeout=15)


def test_the_command_line_schedules_a_run(team, make_workflow):
    make_workflow(team)
    out = run("mantle_run", "deploy", "--team", "acme", "--in", "5m")
    execution_id, word, *_ = out.split()
    assert word == "scheduled"
    assert Execution.objects.get(id=execution_id).status == "scheduled"
    at = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    run("mantle_run", "deploy", "--team", "acme", "--at", at.isoformat())
    assert Execution.objects.filter(run_at=at).exists()
    assert exit_code("mantle_run", "deploy", "--team", "acme", "--in", "soon") == 2
    assert exit_code("mantle_run", "deploy", "--team", "acme", "--at", "2030-01-01") == 2
    assert exit_code("mantle_run", "deploy", "--team", "acme", "--at", "2999-01-01T00:00Z") == 2


def test_bad_schedules_are_400_and_write_nothing(api, team, make_workflow):
    make_workflow(team)
    for body in (
        {"delay": "10m", "run_at": "2030-01-01T00:00:00Z"},
        {"delay": "ten minutes"},
        {"run_at": "2030-01-01T00:00:00"},
        {"run_at": "2999-01-01T00:00:00Z"},
    ):
        refused = api.post("/api/v1/run/deploy", body, format="json")
        assert (refused.status_code, refused.json()["error"]) == (400, "invalid_schedule"), body
    assert not Execution.objects.exists()
    with pytest.raises(ValueError):
        run_time()


def test_an_idempotency_key_answers_the_same_delayed_run(api, team, make_workflow):
    make_workflow(team)
    headers = {"Idempotency-Key": "nightly-1"}
    first = api.post("/api/v1/run/deploy", {"delay": "1h"}, format="json", headers=headers)
    again = api.post("/api/v1/run/deploy", {"delay": "1h"}, format="json", headers=headers)
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json()["execution_id"] == again.json()["execution_id"]
