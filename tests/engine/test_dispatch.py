"""Claims and leases (engine/dispatch.py) against real PostgreSQL, with real threads on their own
connections where they race."""

from __future__ import annotations

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
