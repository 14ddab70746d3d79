"""The reaper: nothing a crashed worker held stays held.

- A running step whose lease expired (its worker stopped heartbeating) is settled as a failure
  on behalf of the lost owner, so it is retried when attempts are left, else it fails the
  execution; the execution moves on and its slot is freed through `execution_finish`. An
  execution whose steps were lost with their worker QUARANTINE_LOST_LEASES times is quarantined:
  it fails, naming why, rather than killing the next worker too (docs/hostile-input.md).
- A running execution past its workflow timeout is ended `timed_out`.
- A running execution with nothing pending or running (an `advance` lost to a crash) advances.
Pending work needs no reaping: the step workers claim it from its table, nothing is handed out
that could be lost, so nothing is re-dispatched.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from engine import orchestrator, runner
from executions import selectors
from executions.models import Status, StepStatus
from executions.services import claims, lifecycle

logger = logging.getLogger(__name__)
QUARANTINE_LOST_LEASES = 2


def reap() -> int:
    """One pass; returns how many things it recovered."""
    return expire_leases() + end_timed_out() + advance_stalled()


def expire_leases() -> int:
    recovered = 0
    for expired in claims.steps_expired():
        claim, owner = expired.claim, expired.owner
        with transaction.atomic():
            lost = claims.execution_lease_lost(execution_id=claim.execution_id, owner=owner)
            error = f"lease expired: worker {owner} stopped heartbeating"
            quarantined = lost >= QUARANTINE_LOST_LEASES
            if quarantined:
                error = f"quarantined: {lost} workers died running it (last: {error})"
            outcome = runner.Outcome(StepStatus.FAILED, error=error, retryable=not quarantined)
            if runner.settle([runner.Settlement(claim, owner, outcome)]):
                logger.warning("reaped step %s of lost worker %s", claim.id, owner)
                recovered += 1
            if quarantined:
                lifecycle.execution_finish(claim.execution_id, status=Status.FAILED, error=error)
    return recovered


def end_timed_out() -> int:
    ids = selectors.executions_past_timeout()
    for execution_id in ids:
        orchestrator.advance(execution_id)
    return len(ids)


def advance_stalled() -> int:
    ids = selectors.executions_stalled(lease=settings.MANTLE.engine.step_lease)
    for execution_id in ids:
        orchestrator.advance(execution_id)
    return len(ids)
