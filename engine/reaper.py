"""The reaper: nothing a crashed worker held stays held.

- A running step whose lease expired (its worker stopped heartbeating) is settled as a failure
  on behalf of the lost owner, so it is retried when attempts are left, else it fails the
  execution; the execution moves on and its slot is freed through `execution_finish`. An
  execution whose steps were lost with their worker QUARANTINE_LOST_LEASES times is quarantined:
  it fails, naming why, rather than killing the next worker too (docs/hostile-input.md). A lease
  that ran out while the engine clock could not reach the database either (an Outage) is not
  counted: every worker was cut off then, none died of the step (docs/operations.md, Database
  failover).
- A running execution past its workflow timeout is ended `timed_out`.
- A running execution with nothing pending or running (an `advance` lost to a crash) advances.
Pending work needs no reaping: the step workers claim it from its table, nothing is handed out
that could be lost, so nothing is re-dispatched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from engine import orchestrator, runner
from executions import selectors
from executions.models import Status, StepStatus
from executions.services import claims, lifecycle

logger = logging.getLogger(__name__)
QUARANTINE_LOST_LEASES = 2
# How long after the clock reached the database again a lease that runs out is still the
# outage's: the workers connect again after it (a dead link found, PgBouncer's pool refilled).
OUTAGE_GRACE = timedelta(seconds=10)


@dataclass(frozen=True)
class Outage:
    """A time the engine clock could not reach the database: from its last tick before to its
    first tick after (engine/clock.py)."""

    began: datetime
    ended: datetime

    def covers(self, moment: datetime) -> bool:
        return self.began <= moment <= self.ended + OUTAGE_GRACE


def reap(outages: Sequence[Outage] = ()) -> int:
    """One pass; returns how many things it recovered."""
    return expire_leases(outages) + end_timed_out() + advance_stalled()


def expire_leases(outages: Sequence[Outage] = ()) -> int:
    recovered = 0
    for expired in claims.steps_expired():
        claim, owner = expired.claim, expired.owner
        with transaction.atomic():
            if any(outage.covers(expired.expired_at) for outage in outages):
                lost = 0  # not the step's doing: retried, not counted
                error = f"lease expired: worker {owner} could not reach the database"
            else:
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
