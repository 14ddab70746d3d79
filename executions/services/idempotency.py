"""Admission under an `Idempotency-Key`: a retry returns the original execution.

The unique index `execution_idempotency_key` (team, idempotency_key) is what enforces it; the
lookup first is only the fast path of a plain retry. Two racing requests with one key both miss
the lookup, then admission serialises them on the team lock: the second one's insert violates
the index (the first one has committed by then), and it returns the first one's execution.
Keys are kept on the execution row, so they live as long as the execution (at least 24 h: no
job deletes executions).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from executions.selectors import execution_by_idempotency_key, execution_queue_positions
from executions.services.admission import (
    Admission,
    ConcurrencyLimitExceeded,
    Resolved,
    execution_admit,
)
from executions.services.scheduled import execution_schedule
from teams.models import Team
from workflows.models import WorkflowDefinition

CONSTRAINT = "execution_idempotency_key"


class IdempotencyKeyReused(Exception):
    def __init__(self, key: str, workflow: str) -> None:
        self.key = key
        super().__init__(f"Idempotency-Key {key!r} was already used to run workflow {workflow!r}")


def execution_admit_once(
    *,
    team: Team,
    workflow: WorkflowDefinition,
    inputs: dict[str, Any] | None,
    trigger: dict[str, Any],
    idempotency_key: str | None,
    priority: int | None = None,
    resolved: Resolved | None = None,
) -> Admission:
    """The new admission, or the original one (`replayed`) admitted under the key.

    Raises what `execution_admit` raises, and IdempotencyKeyReused when the key ran another
    workflow. With `resolved`, a key already used is ResolutionStale (admit_resolved checks it
    in the admission's statement, which saves the lookup's round trip): the caller resolves
    again and comes back without `resolved`, to this lookup.
    """
    if (
        resolved is None
        and idempotency_key is not None
        and (original := original_admission(team, workflow, idempotency_key))
    ):
        return original
    try:
        return execution_admit(
            team=team,
            workflow=workflow,
            inputs=inputs,
            trigger=trigger,
            idempotency_key=idempotency_key,
            priority=priority,
            resolved=resolved,
        )
    except IntegrityError as exc:
        if idempotency_key is None or constraint_of(exc) != CONSTRAINT:
            raise
        original = original_admission(team, workflow, idempotency_key)
        assert original is not None, "the index said the key exists"
        return original
    except ConcurrencyLimitExceeded:
        # The racing request that holds the key may have taken the last slot: it is the original.
        if idempotency_key is not None and (
            original := original_admission(team, workflow, idempotency_key)
        ):
            return original
        raise


def execution_schedule_once(
    *,
    team: Team,
    workflow: WorkflowDefinition,
    run_at: datetime,
    inputs: dict[str, Any] | None,
    trigger: dict[str, Any],
    priority: int | None,
    idempotency_key: str | None,
) -> Admission:
    """A new delayed run (services/scheduled.py), or the original one (`replayed`) made under
    the key."""
    if idempotency_key is not None and (
        original := original_admission(team, workflow, idempotency_key)
    ):
        return original
    try:
        with transaction.atomic():
            scheduled = execution_schedule(
                team=team,
                workflow=workflow,
                run_at=run_at,
                inputs=inputs,
                trigger=trigger,
                priority=priority,
                idempotency_key=idempotency_key,
            )
    except IntegrityError as exc:
        if idempotency_key is None or constraint_of(exc) != CONSTRAINT:
            raise
        original = original_admission(team, workflow, idempotency_key)
        assert original is not None, "the index said the key exists"
        return original
    return Admission(execution=scheduled, queue_position=None)


def original_admission(team: Team, workflow: WorkflowDefinition, key: str) -> Admission | None:
    original = execution_by_idempotency_key(team=team, key=key)
    if original is None:
        return None
    if original.workflow_id != workflow.id:
        raise IdempotencyKeyReused(key, original.workflow.name)
    position = execution_queue_positions(executions=[original]).get(original.id)
    return Admission(execution=original, queue_position=position, replayed=True)


def constraint_of(exc: IntegrityError) -> str | None:
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None)
