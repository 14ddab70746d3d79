"""Delayed runs (docs/operations.md, Delayed runs): `scheduled` until their `run_at`, holding no
slot and counted by no limit, then admitted through admission by the engine clock, limits
decided then.

A due run is admitted in one transaction that locks its row (SKIP LOCKED: a second clock passes
it over), deletes it and admits an execution with the same id, inputs, trigger, priority and
Idempotency-Key: either the admission commits and the scheduled row is gone, or neither
happened. So however many clocks run, or die mid-pass and restart, each run is admitted once.
Rejected when due (a full `on_limit: reject` workflow, `on_pause: reject`), it ends `failed`
with the rejection as its error.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from core.durations import parse_duration
from executions.models import Execution, Status
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.lifecycle import execution_finish
from teams.models import Team
from workflows.admission_values import priority_value
from workflows.models import WorkflowDefinition
from workflows.schema import InvalidInputs, WorkflowSpec, validate_inputs

logger = logging.getLogger(__name__)

# How far ahead a delayed run may be.
LONGEST_DELAY = timedelta(days=366)
# Due runs admitted per pass of the clock (every 0.25 s), so a pass stays short.
BATCH = 500


def run_time(*, run_at: object = None, delay: object = None) -> datetime:
    """A delayed run's time from `run_at` (RFC 3339, with its offset) or `delay` (a duration
    from now: "10m", "1h30m"). ValueError for both or neither, a bad value, or more than
    LONGEST_DELAY ahead; a time already past is due at once."""
    if (run_at is None) == (delay is None):
        raise ValueError("give run_at or delay (one of them)")
    now = timezone.now()
    try:
        if delay is not None:
            when = now + timedelta(seconds=parse_duration(delay))  # type: ignore[arg-type]
        else:
            when = datetime.fromisoformat(str(run_at).replace("Z", "+00:00"))
    except (TypeError, OverflowError) as exc:
        raise ValueError(str(exc)) from None
    if when.tzinfo is None:
        raise ValueError(f"{run_at!r} needs a time zone offset (RFC 3339), e.g. Z")
    if when - now > LONGEST_DELAY:
        raise ValueError(f"at most {LONGEST_DELAY.days} days ahead")
    return when


def execution_schedule(
    *,
    team: Team,
    workflow: WorkflowDefinition,
    run_at: datetime,
    inputs: dict[str, Any] | None = None,
    trigger: dict[str, Any] | None = None,
    priority: int | None = None,
    idempotency_key: str | None = None,
) -> Execution:
    """A delayed run of the workflow's current version, its inputs checked now (InvalidInputs)
    and again when it is admitted. `priority` None: the workflow's."""
    version = workflow.applied_version
    spec = WorkflowSpec.from_dict(version.spec)
    inputs = validate_inputs(spec, inputs)
    trigger = trigger or {}
    return Execution.objects.create(
        team=team,
        workflow=workflow,
        version=version,
        status=Status.SCHEDULED,
        inputs=inputs,
        trigger=trigger,
        # Evaluated now from what it is evaluated from when admitted: the same value.
        priority=priority_value(spec, inputs=inputs, trigger=trigger, given=priority),
        idempotency_key=idempotency_key,
        run_at=run_at,
    )


def scheduled_admit_due() -> int:
    """Admit the runs now due (by the database's clock), oldest run_at first; how many were
    handled (admitted or failed)."""
    due = list(
        Execution.objects.filter(status=Status.SCHEDULED, run_at__lte=Now())
        .order_by("run_at", "created_at")
        .values_list("id", flat=True)[:BATCH]
    )
    return sum(_admit_one(execution_id) for execution_id in due)


def _admit_one(execution_id: uuid.UUID) -> bool:
    with transaction.atomic():
        run = (
            Execution.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related("team", "workflow__current_version")
            .filter(id=execution_id, status=Status.SCHEDULED)
            .first()
        )
        if run is None:
            return False  # admitted or cancelled meanwhile, or another clock holds it
        try:
            with transaction.atomic():
                Execution.objects.filter(id=run.id).delete()
                execution_admit(
                    team=run.team,
                    workflow=run.workflow,
                    inputs=run.inputs,
                    trigger=run.trigger,
                    priority=run.priority,
                    idempotency_key=run.idempotency_key,
                    execution_id=run.id,
                )
                Execution.objects.filter(id=run.id).update(run_at=run.run_at)
        except (ConcurrencyLimitExceeded, InvalidInputs) as rejected:
            # Rejected by a limit, or by the inputs of a version applied since.
            logger.warning("delayed run %s rejected when due: %s", run.id, rejected)
            execution_finish(run.id, status=Status.FAILED, error=f"rejected when due: {rejected}")
    return True
