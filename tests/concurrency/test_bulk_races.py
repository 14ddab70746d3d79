"""A bulk replay racing a pause (docs/operations.md, Bulk actions): two clocks advance the same
bulk replay of failed executions while the workflow is paused and resumed over and over and two
threads complete what runs. The workflow's limit holds in every sample, nothing becomes pending
while a pause holds, and each failed execution is replayed exactly once. Without the bulk
record's row lock, the two clocks take the same batches and replay executions twice."""

from __future__ import annotations

import pytest
from django.db import connections
from django.db.models import Count
from django.db.models.query import QuerySet

from executions.models import BulkAction, BulkStatus, Execution, Status
from executions.services import bulk as bulk_service
from executions.services.bulk import REPLAY, BulkFilter, bulk_advance, bulk_create
from executions.services.pauses import workflow_pause_set
from tests.concurrency.harness import run_in_threads
from tests.concurrency.test_admission_races import drain, with_completions
from tests.concurrency.test_pause_races import PauseCycles

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT, FAILED = 5, 300


def failed_executions(workflow) -> None:
    version = workflow.applied_version
    Execution.objects.bulk_create(
        Execution(team=workflow.team, workflow=workflow, version=version, status=Status.FAILED)
        for _ in range(FAILED)
    )


def clock_until_done(bulk: BulkAction) -> int:
    handled = 0
    try:
        while BulkAction.objects.filter(id=bulk.id, status=BulkStatus.RUNNING).exists():
            handled += bulk_advance(budget=0.2)
    finally:
        connections.close_all()
    return handled


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replays 20 a batch: the replay spans 15 batches, so the pauses come between and during
    many (at 200 a batch it took two, and as few pauses)."""
    monkeypatch.setattr(bulk_service, "REPLAY_BATCH", 20)


def replay_racing_pauses(team, workflow, sampler) -> tuple[BulkAction, PauseCycles, int]:
    failed_executions(workflow)
    bulk = bulk_create(
        team=team, action=REPLAY, where=BulkFilter(status=Status.FAILED), limit=FAILED
    )
    watch = sampler(team.id)
    cycles = PauseCycles(
        team.id, lambda paused: workflow_pause_set(workflow=workflow, paused=paused)
    )
    cycles.start()
    try:
        handled = with_completions(
            [workflow], lambda: run_in_threads([lambda: clock_until_done(bulk)] * 2, threads=2)
        )
    finally:
        cycles.stop()
    watch.stop()
    bulk.refresh_from_db()
    assert watch.samples > 20
    assert watch.max_per_workflow.get(workflow.id, 0) <= LIMIT
    return bulk, cycles, sum(handled)  # type: ignore[arg-type]


def test_a_bulk_replay_racing_a_pause_keeps_the_limit_and_the_pause(
    make_team, make_workflow, sampler
):
    team = make_team()
    workflow = make_workflow(team, limit=LIMIT)
    bulk, cycles, handled = replay_racing_pauses(team, workflow, sampler)
    late = cycles.pending_while_paused()
    replays = Execution.objects.filter(replay_of__isnull=False)
    per_original = replays.values("replay_of").annotate(n=Count("id"))
    print(
        f"\nbulk replay of {FAILED}: {cycles.cycles} pauses, {late} pending while paused, "
        f"{replays.count()} replays, {bulk.done} done, {bulk.failed} failed"
    )
    assert (bulk.status, bulk.done, bulk.failed, handled) == ("completed", FAILED, 0, FAILED)
    assert cycles.cycles > 3 and late == 0
    assert replays.count() == FAILED and {row["n"] for row in per_original} == {1}
    drain([workflow])
    assert replays.filter(status=Status.COMPLETED).count() == FAILED


def test_without_the_bulk_records_lock_two_clocks_replay_twice(
    make_team, make_workflow, sampler, monkeypatch
):
    """Proof that the test catches the bug: each clock reads the same progress and handles the
    same batch."""
    monkeypatch.setattr(QuerySet, "select_for_update", lambda self, **kwargs: self)
    team = make_team()
    workflow = make_workflow(team, limit=LIMIT)
    replay_racing_pauses(team, workflow, sampler)
    replays = Execution.objects.filter(replay_of__isnull=False).count()
    print(f"\nwithout the lock: {replays} replays of {FAILED}")
    assert replays > FAILED
