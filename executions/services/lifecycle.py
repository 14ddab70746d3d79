"""Transitions of an execution. Every terminal status is reached through `execution_finish` (or
`execution_finish_locked`, its second half, for a row the caller already read under its lock),
which saves the row so the post_save receiver (signals.py) schedules promotion after commit."""

from __future__ import annotations

import uuid

from django.db import OperationalError, transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from core import locks
from executions.models import TERMINAL, Execution, Status, StepExecution, StepStatus


class ExecutionBusy(Exception):
    def __init__(self) -> None:
        super().__init__(
            f"the execution is being updated (locked longer than {locks.LOCK_TIMEOUT_MS} ms); "
            "try again"
        )


class NotCancellable(Exception):
    def __init__(self, status: str) -> None:
        self.status = status
        super().__init__(f"execution is already {status}")


def execution_finish(
    execution_id: uuid.UUID, *, status: str, error: str = "", only_from: str | None = None
) -> bool:
    """Move a live execution to a terminal status; False when it was already terminal, or not
    in `only_from` when given."""
    # Inside a caller's transaction (the engine finishes executions in batches), no savepoint:
    # it would cost two round trips, and any error here fails the caller's transaction anyway.
    with transaction.atomic(savepoint=False):
        # The row lock makes check-then-save conditional: of two racing finishers, one wins.
        execution = (
            Execution.objects.select_for_update(of=("self",))
            .select_related("team", "workflow")
            .get(id=execution_id)
        )
        if only_from not in (None, execution.status):
            return False
        return execution_finish_locked(execution, status=status, error=error)


def execution_finish_locked(execution: Execution, *, status: str, error: str = "") -> bool:
    """`execution_finish` for an execution the caller's transaction read under its row lock (the
    orchestrator's advance), with its team and workflow: no second read."""
    assert status in TERMINAL, status
    if execution.status in TERMINAL:
        return False
    with transaction.atomic(savepoint=False):
        execution.status = status
        execution.error = error
        execution.blocked_by = None
        execution.completed_at = timezone.now()
        execution.save(update_fields=["status", "error", "blocked_by", "completed_at"])
        # Steps not held by a runner end here; a running attempt sees the status on its next
        # heartbeat and ends itself (or the reaper ends it when its lease expires).
        StepExecution.objects.filter(execution_id=execution.id).filter(
            Q(status=StepStatus.PENDING) | Q(status=StepStatus.RUNNING, lease_owner="")
        ).update(status=StepStatus.CANCELLED, completed_at=Now())
    return True


def execution_start(execution_id: uuid.UUID) -> bool:
    """pending → running; True for the one caller that made the move (claims are conditional,
    so two workers handed the same execution never both start it)."""
    return bool(
        Execution.objects.filter(id=execution_id, status=Status.PENDING).update(
            status=Status.RUNNING, started_at=Now()
        )
    )


def execution_cancel(execution_id: uuid.UUID, *, reason: str = "cancelled") -> None:
    """Cancel from queued, pending or running. A running execution's steps see the status on
    their next heartbeat and stop. Raises NotCancellable on a terminal execution, and
    ExecutionBusy when its row stays locked (by the orchestrator working on it) past the lock
    timeout: the caller answers at once instead of hanging."""
    try:
        with transaction.atomic():
            locks.bound_lock_waits()
            finished = execution_finish(execution_id, status=Status.CANCELLED, error=reason)
    except OperationalError as exc:
        if not locks.is_busy(exc):
            raise
        raise ExecutionBusy() from exc
    if not finished:
        status = Execution.objects.values_list("status", flat=True).get(id=execution_id)
        raise NotCancellable(status)
