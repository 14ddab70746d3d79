from __future__ import annotations

import contextlib
import multiprocessing
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from django.db import connections, transaction

from executions.models import Execution, Status
from executions.services import promotion
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.lifecycle import execution_finish
from teams.models import Team
from tests.concurrency.harness import run_in_threads, status_or_deadlock

T = TypeVar("T")

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 3


def admit_or_reject(team: Team, workflow) -> str:
    """The admission's status, "rejected", or "deadlock" (harness.is_deadlock: the lockless
    mutants only; the locked tests' outcome checks refuse it)."""
    try:
        return status_or_deadlock(
            lambda: execution_admit(team=team, workflow=workflow).execution.status
        )
    except ConcurrencyLimitExceeded:
        return "rejected"


def complete_holders(workflow_ids: list[int], until: threading.Event) -> int:
    """Finish random slot holders (which promotes the queue after commit) until told to stop."""
    finished = 0
    while not until.is_set():
        holder = (
            Execution.objects.filter(workflow_id__in=workflow_ids, status=Status.PENDING)
            .order_by("?")
            .values_list("id", flat=True)
            .first()
        )
        # The other completer may finish it first, and a prune racing this flood (the retention
        # test's horizon is a microsecond) may delete it before this finish reads it.
        with contextlib.suppress(Execution.DoesNotExist):
            if holder is not None and execution_finish(holder, status=Status.COMPLETED):
                finished += 1
        time.sleep(0.002)
    return finished


def with_completions(workflows: list, run: Callable[[], T]) -> T:
    """Run `run()` while two threads finish random slot holders of the workflows (each finish
    promotes)."""
    done = threading.Event()
    ids = [w.id for w in workflows]
    completers = [
        threading.Thread(target=lambda: (complete_holders(ids, done), connections.close_all()))
        for _ in range(2)
    ]
    for completer in completers:
        completer.start()
    try:
        return run()
    finally:
        done.set()
        for completer in completers:
            completer.join()


def flood(team: Team, workflows: list, *, admissions: int, threads: int = 16) -> list[str]:
    """`admissions` concurrent admissions spread over the workflows while two threads finish
    slot holders concurrently."""
    targets = [workflows[i % len(workflows)] for i in range(admissions)]
    jobs = [(lambda w=w: admit_or_reject(team, w)) for w in targets]
    return with_completions(workflows, lambda: run_in_threads(jobs, threads=threads))  # type: ignore[return-value]


def drain(workflows: list) -> None:
    """Finish holders until nothing is queued or running; every finish promotes after commit."""
    for _ in range(10_000):
        holder = (
            Execution.objects.filter(workflow__in=workflows, status=Status.PENDING)
            .order_by("created_at")
            .first()
        )
        if holder is None:
            break
        execution_finish(holder.id, status=Status.COMPLETED)
    assert not Execution.objects.filter(workflow__in=workflows, status=Status.QUEUED).exists()


def assert_promoted_in_fifo_order(workflow) -> None:
    queued = list(
        Execution.objects.filter(workflow=workflow, queued_at__isnull=False).order_by("created_at")
    )
    promoted_at = [e.promoted_at for e in queued]
    assert all(at is not None for at in promoted_at)
    assert promoted_at == sorted(promoted_at), "a later execution was promoted first"


def assert_a_flood_keeps_the_workflow_limit(team: Team, workflow, sampler, *, admissions: int):  # type: ignore[no-untyped-def]
    """Flood the workflow (limit LIMIT) with completions running, then drain it: every admission
    recorded, at most LIMIT holders in every sample, the queue promoted in FIFO order. Returns
    the stopped sampler."""
    watch = sampler(team.id)
    outcomes = flood(team, [workflow], admissions=admissions)
    drain([workflow])
    watch.stop()
    assert sorted(set(outcomes)) <= ["pending", "queued"]
    assert len(outcomes) == Execution.objects.filter(workflow=workflow).count() == admissions
    assert watch.samples > 20
    assert 0 < watch.max_per_workflow[workflow.id] <= LIMIT
    assert_promoted_in_fifo_order(workflow)
    return watch


def test_the_workflow_limit_holds_under_a_flood_with_completions(make_team, make_workflow, sampler):
    team = make_team()
    workflow = make_workflow(team, limit=LIMIT)
    watch = assert_a_flood_keeps_the_workflow_limit(team, workflow, sampler, admissions=60)
    print(
        f"\nworkflow limit {LIMIT}: max holders seen {watch.max_per_workflow[workflow.id]}"
        f" in {watch.samples} samples"
    )


def test_without_locks_the_same_flood_breaks_the_limit(
    make_team, make_workflow, sampler, without_locks
):
    """Proof that the harness catches the bug: remove the locks and the limit is exceeded."""
    team = make_team()
    workflow = make_workflow(team, limit=LIMIT)
    watch = sampler(team.id)
    flood(team, [workflow], admissions=60)
    watch.stop()
    print(
        f"\nwithout locks: max holders seen {watch.max_per_workflow[workflow.id]} (limit {LIMIT})"
    )
    assert watch.max_per_workflow[workflow.id] > LIMIT


def test_the_team_limit_holds_across_workflows(make_team, make_workflow, sampler):
    team = make_team(max_concurrent_executions=4)
    workflows = [make_workflow(team, name) for name in ("a", "b", "c")]
    watch = sampler(team.id)
    outcomes = flood(team, workflows, admissions=60)
    drain(workflows)
    watch.stop()
    assert len(outcomes) == 60
    assert 0 < watch.max_team <= 4
    for workflow in workflows:
        assert_promoted_in_fifo_order(workflow)


def test_a_rejecting_workflow_admits_exactly_its_limit(make_team, make_workflow, sampler):
    team = make_team()
    workflow = make_workflow(team, limit=LIMIT, on_limit="reject")
    watch = sampler(team.id)
    outcomes = run_in_threads(
        [lambda: admit_or_reject(team, workflow) for _ in range(50)], threads=16
    )
    watch.stop()
    assert outcomes.count("pending") == LIMIT
    assert outcomes.count("rejected") == 50 - LIMIT
    assert Execution.objects.filter(workflow=workflow).count() == LIMIT


def _admit_in_child(team_id: int, workflow_id: int, count: int, results) -> None:  # type: ignore[no-untyped-def]
    from workflows.models import WorkflowDefinition

    connections.close_all()
    team = Team.objects.get(id=team_id)
    workflow = WorkflowDefinition.objects.select_related("current_version").get(id=workflow_id)
    for _ in range(count):
        results.put(admit_or_reject(team, workflow))
    connections.close_all()


def test_the_limit_holds_across_processes(make_team, make_workflow, sampler):
    team = make_team()
    workflow = make_workflow(team, limit=LIMIT)
    connections.close_all()  # children are forked: they must not share our connection
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    watch = sampler(team.id)
    children = [
        context.Process(target=_admit_in_child, args=(team.id, workflow.id, 10, results))
        for _ in range(6)
    ]
    for child in children:
        child.start()
    done = threading.Event()
    completer = threading.Thread(
        target=lambda: (complete_holders([workflow.id], done), connections.close_all())
    )
    completer.start()
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    done.set()
    completer.join()
    outcomes = [results.get(timeout=5) for _ in range(60)]
    drain([workflow])
    watch.stop()
    assert set(outcomes) <= {"pending", "queued"}
    assert Execution.objects.filter(workflow=workflow).count() == 60
    assert 0 < watch.max_per_workflow[workflow.id] <= LIMIT
    assert_promoted_in_fifo_order(workflow)


def test_racing_promoters_promote_each_execution_once(make_team, make_workflow, sampler):
    team = make_team(max_concurrent_executions=1)
    workflow = make_workflow(team)
    blocker = execution_admit(team=team, workflow=workflow).execution
    for _ in range(40):
        execution_admit(team=team, workflow=workflow)
    # Raise the limit and free the slot behind promotion's back, then let 8 promoters race.
    Team.objects.filter(id=team.id).update(max_concurrent_executions=10)
    Execution.objects.filter(id=blocker.id).update(status=Status.COMPLETED)
    watch = sampler(team.id)
    promoted = run_in_threads(
        [lambda: promotion.queue_promote(team.id, trigger="poller") for _ in range(8)], threads=8
    )
    watch.stop()
    flat = [execution_id for ids in promoted for execution_id in ids]
    assert len(flat) == len(set(flat)) == 10
    assert watch.max_team <= 10


def _finish_while_an_admission_queues(team: Team, workflow) -> Execution:
    """The race a completion's promotion must win: an admission reads the holders (the slot is
    full) and queues, but commits only after the holder's finish has committed and its promotion
    begun. The admission runs in a transaction kept open (its locks held) until 0.3 s after the
    finish began. Returns the queued execution, re-read once the finish has returned."""
    holder = execution_admit(team=team, workflow=workflow).execution
    queued, release = threading.Event(), threading.Event()
    admitted: list[Execution] = []

    def admit_and_hold() -> None:
        try:
            with transaction.atomic():
                admitted.append(execution_admit(team=team, workflow=workflow).execution)
                queued.set()
                release.wait(timeout=10)
        finally:
            connections.close_all()

    admission = threading.Thread(target=admit_and_hold)
    admission.start()
    assert queued.wait(timeout=10)
    assert admitted[0].status == Status.QUEUED
    threading.Timer(0.3, release.set).start()
    execution_finish(holder.id, status=Status.COMPLETED)  # promotes after its commit
    admission.join()
    return Execution.objects.get(id=admitted[0].id)


def test_a_completion_promotes_what_an_admission_queued_while_it_committed(
    make_team, make_workflow
):
    team = make_team()
    workflow = make_workflow(team, limit=1)
    assert _finish_while_an_admission_queues(team, workflow).status == Status.PENDING


def test_without_locks_that_promotion_is_lost(make_team, make_workflow, without_locks):
    """Proof that the test catches the bug: a promotion that does not wait for the team's lock
    finds no queue and leaves the execution queued beside a free slot."""
    team = make_team()
    workflow = make_workflow(team, limit=1)
    assert _finish_while_an_admission_queues(team, workflow).status == Status.QUEUED
