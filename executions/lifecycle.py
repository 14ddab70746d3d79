"""Transitions of an execution. Every terminal status is reached through `finish_execution`,
which saves the row so the post_save receiver (signals.py) schedules promotion after commit."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from executions.models import TERMINAL, Execution, Status


class NotCancellable(Exception):
    def __init__(self, status: str) -> None:
        self.status = status
        super().__init__(f"execution is already {status}")


def finish_execution(execution_id: uuid.UUID, *, status: str, error: str = "") -> bool:
    """Move a live execution to a terminal status; False when it was already terminal."""
    assert status in TERMINAL, status
    with transaction.atomic():
        # The row lock makes check-then-save conditional: of two racing finishers, one wins.
        execution = (
            Execution.objects.select_for_update(of=("self",))
            .select_related("team", "workflow")
            .get(id=execution_id)
        )
        if execution.status in TERMINAL:
            return False
        execution.status = status
        execution.error = error
        execution.blocked_by = None
        execution.completed_at = timezone.now()
        execution.save(update_fields=["status", "error", "blocked_by", "completed_at"])
    return True


def cancel_execution(execution_id: uuid.UUID, *, reason: str = "cancelled") -> None:
    """Cancel from queued, pending or running. A running execution's steps see the status on
    their next heartbeat and stop. Raises NotCancellable on a terminal execution."""
    if not finish_execution(execution_id, status=Status.CANCELLED, error=reason):
        status = Execution.objects.values_list("status", flat=True).get(id=execution_id)
        raise NotCancellable(status)
