"""Claims and leases (engine/dispatch.py) against real PostgreSQL, with real threads on their own
connections where they race."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from engine import dispatch
from executions.models import Execution, StepExecution
from executions.services.lifecycle import execution_start
from executions.sql import queries
from tests.engine.conftest import run
from tests.factories import (
    ExecutionFactory,
    StepExecutionFactory,
    WorkflowFactory,
    fanout_branches,
)
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8
STEPS = 400


def running_execution(apply: Callable[..., WorkflowDefinition], steps: int) -> Execution:
    execution = run(apply("name: many\nsteps:\n  - name: only\n    action: test/noop\n"))
    assert execution_start(execution.id)
    StepExecution.objects.bulk_create(
        StepExecution(execution=execution, name="only", fanout_index=i, status="pending")
        for i in range(steps)
    )
    return execution


def claim_in_threads(claim: Callable[[str, int], list[dispatch.Claim]]) -> Counter[int]:
    """THREADS threads claim 5 at a time until nothing is left; how often each step was won."""
    won: Counter[int] = Counter()
    barrier = threading.Barrier(THREADS)

    def worker(number: int) -> None:
        try:
            barrier.wait(timeout=10)
            while claimed := claim(f"owner-{number}", 5):
                won.update(step.id for step in claimed)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return won


def test_racing_workers_claim_every_step_exactly_once(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    running_execution(apply, STEPS)
    won = claim_in_threads(dispatch.steps_claim)
    assert len(won) == STEPS
    assert set(won.values()) == {1}


def test_without_skip_locked_racing_workers_claim_steps_twice(
    apply: Callable[..., WorkflowDefinition], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutant the race test must catch: the claim without its row locks."""
    lockless = queries["steps_claim"].replace("FOR UPDATE OF p SKIP LOCKED", "")
    monkeypatch.setitem(queries, "steps_claim", lockless)
    running_execution(apply, STEPS)
    won = claim_in_threads(dispatch.steps_claim)
    assert max(won.values()) > 1


def test_a_claim_takes_no_more_than_its_limit_and_nothing_not_yet_due(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    execution = running_execution(apply, 3)
    later = timezone.now() + timedelta(seconds=30)
    StepExecution.objects.filter(execution=execution, fanout_index=0).update(not_before=later)
    assert len(dispatch.steps_claim("me", 1)) == 1
    assert len(dispatch.steps_claim("me", 10)) == 1
    assert dispatch.steps_claim("me", 10) == []
    due = dispatch.steps_next_due()
    assert due is not None and 25 < due <= 30


def test_renewing_leases_is_fenced_by_owner_and_attempt_and_reads_the_execution_status(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    execution = running_execution(apply, 3)
    a, b, c = sorted(dispatch.steps_claim("me", 3), key=lambda claim: claim.id)
    held = {a.id: a.attempt, b.id: b.attempt + 1, c.id: c.attempt}
    StepExecution.objects.filter(id=c.id).update(lease_owner="someone-else")
    assert dispatch.leases_renew("me", held) == {a.id: "running"}
    Execution.objects.filter(id=execution.id).update(status="cancelled")
    assert dispatch.leases_renew("me", held) == {a.id: "cancelled"}


def _backlog_and_newcomer() -> tuple[Execution, StepExecution]:
    """Team A: 100 pending executions, 100 running ones with a pending step each and one with
    500 pending branches, all older than team B's pending execution and its running
    execution's one pending step."""
    flood, other = WorkflowFactory(name="flood"), WorkflowFactory(name="other")
    fanout_branches(ExecutionFactory(workflow=flood, status="running"), 500)
    for execution in ExecutionFactory.create_batch(100, workflow=flood, status="running"):
        StepExecutionFactory(execution=execution)
    ExecutionFactory.create_batch(100, workflow=flood)
    newcomer = ExecutionFactory(workflow=other)
    step = StepExecutionFactory(execution=ExecutionFactory(workflow=other, status="running"))
    return newcomer, step


def test_claims_take_the_teams_in_turn_so_a_backlog_does_not_hold_back_another_team(
    transactional_db: None,
) -> None:
    newcomer, step = _backlog_and_newcomer()
    assert newcomer.id in dispatch.executions_claim(2)
    assert step.id in {claim.id for claim in dispatch.steps_claim("me", 2)}


def test_claims_in_age_order_alone_make_another_team_wait_behind_the_backlog(
    transactional_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mutant the fairness test must catch: claims ranked without the teams' turns."""
    for name in ("executions_claim", "steps_claim"):
        unfair = re.sub(r"ORDER BY ranked\.turn, ", "ORDER BY ", queries[name])
        monkeypatch.setitem(queries, name, unfair)
    newcomer, step = _backlog_and_newcomer()
    assert newcomer.id not in dispatch.executions_claim(2)
    assert step.id not in {claim.id for claim in dispatch.steps_claim("me", 2)}
