"""Reads of executions for the API: lists with cursor pagination, detail, idempotency lookup."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import connection
from django.db.models import Q, QuerySet

from executions.models import Execution, Status
from teams.models import Team

# 1-based places of queued executions in their workflows' FIFO queues (as QUEUE_POSITION).
_QUEUE_POSITIONS = """
SELECT id, position FROM (
  SELECT id, row_number() OVER (PARTITION BY workflow_id ORDER BY created_at, id) AS position
    FROM executions_execution
   WHERE status = 'queued' AND workflow_id = ANY(%(workflow_ids)s)
) queue WHERE id = ANY(%(ids)s)
"""


def with_queue_positions(executions: list[Execution]) -> list[Execution]:
    """Set `queue_position` on each execution: its place when queued, else None. One query."""
    queued = [e for e in executions if e.status == Status.QUEUED]
    positions: dict[uuid.UUID, int] = {}
    if queued:
        with connection.cursor() as cursor:
            cursor.execute(
                _QUEUE_POSITIONS,
                {
                    "workflow_ids": sorted({e.workflow_id for e in queued}),
                    "ids": [e.id for e in queued],
                },
            )
            positions = dict(cursor.fetchall())
    for execution in executions:
        execution.queue_position = positions.get(execution.id)  # type: ignore[attr-defined]
    return executions


def _executions(team: Team) -> QuerySet[Execution]:
    return Execution.objects.filter(team=team).select_related("workflow", "version")


def execution_list(
    *,
    team: Team,
    workflow: str | None = None,
    status: str | None = None,
    limit: int = 50,
    after: tuple[datetime, uuid.UUID] | None = None,
) -> list[Execution]:
    """The team's executions, newest first; `after` is the (created_at, id) of the last one seen."""
    executions = _executions(team).order_by("-created_at", "-id")
    if workflow is not None:
        executions = executions.filter(workflow__name=workflow)
    if status is not None:
        executions = executions.filter(status=status)
    if after is not None:
        created_at, execution_id = after
        executions = executions.filter(
            Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=execution_id)
        )
    return with_queue_positions(list(executions[:limit]))


def execution_get(*, team: Team, execution_id: uuid.UUID) -> Execution | None:
    """One of the team's executions with its steps; None when absent or another team's."""
    execution = _executions(team).prefetch_related("steps").filter(id=execution_id).first()
    return None if execution is None else with_queue_positions([execution])[0]


def execution_by_idempotency_key(*, team: Team, key: str) -> Execution | None:
    execution = _executions(team).filter(idempotency_key=key).first()
    return None if execution is None else with_queue_positions([execution])[0]
