"""Leases run out in a database outage (docs/operations.md, Database failover): the reaper
retries those attempts but does not count them toward quarantine (every worker was cut off, none
died of the step), and the engine clock notes an outage only when it failed to tick for longer
than OUTAGE_GAP, not when another clock had its turn."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from django.utils import timezone

from engine import clock, orchestrator, reaper
from engine.dispatch import Claim, steps_claim
from executions.models import Execution, StepExecution
from tests.engine.conftest import run
from workflows.models import WorkflowDefinition

RETRIED = (
    "name: cut\nsteps:\n  - name: only\n    action: test/noop\n"
    "    retry: {max_attempts: 5, backoff: fixed}\n"
)


def running_step(workflow: WorkflowDefinition, owner: str) -> Claim:
    """Its one step claimed by `owner`, its lease run out a second ago."""
    orchestrator.executions_start(10, owner="starter", room=0)
    (claim,) = steps_claim(owner, 1)
    StepExecution.objects.filter(id=claim.id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    return claim


def an_outage_around_now() -> reaper.Outage:
    return reaper.Outage(began=timezone.now() - timedelta(seconds=30), ended=timezone.now())


def test_a_lease_run_out_in_an_outage_is_retried_and_not_counted(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    execution = run(apply(RETRIED))
    claim = running_step(execution.workflow, "cut-off:1")
    # It has lost a worker before: one more counted would quarantine it.
    Execution.objects.filter(id=execution.id).update(lost_leases=1, lost_lease_owner="dead:1")
    assert reaper.expire_leases([an_outage_around_now()]) == 1
    step = StepExecution.objects.get(id=claim.id)
    execution.refresh_from_db()
    assert (step.status, step.attempt) == ("pending", 2)  # retried
    assert (execution.status, execution.lost_leases) == ("running", 1)
    assert step.error == "lease expired: worker cut-off:1 could not reach the database"


def test_outside_an_outage_the_second_worker_lost_quarantines(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    """The same, the lease run out an hour after the outage: counted, and quarantined."""
    execution = run(apply(RETRIED))
    running_step(execution.workflow, "died:2")
    Execution.objects.filter(id=execution.id).update(lost_leases=1, lost_lease_owner="dead:1")
    long_ago = reaper.Outage(
        began=timezone.now() - timedelta(hours=2), ended=timezone.now() - timedelta(hours=1)
    )
    assert reaper.expire_leases([long_ago]) == 1
    execution.refresh_from_db()
    assert (execution.status, execution.lost_leases) == ("failed", 2)
    assert "quarantined: 2 workers died running it" in execution.error


def test_the_clock_notes_an_outage_only_after_failing(transactional_db: None) -> None:
    quiet = {"ticked": time.time() - 60}  # another clock's turn: no failure noted
    clock.tick(quiet)
    assert quiet["outages"] == []
    cut = {"ticked": time.time() - 60, "failed": True}
    clock.tick(cut)
    (outage,) = cut["outages"]
    assert outage.ended - outage.began > timedelta(seconds=clock.OUTAGE_GAP)
    assert "failed" not in cut
    clock.tick(cut)  # ticking again: nothing more
    assert len(cut["outages"]) == 1
