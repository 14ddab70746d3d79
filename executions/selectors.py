"""Reads of executions and their queues, for the API, the CLI and the dashboard."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Q, QuerySet

from executions.models import Execution, Status
from teams.models import Team

# One row per workflow of the teams: its current limits and its live counts. Slot holders
# (pending + running) are what the limits count, so they are reported as `running`.
_QUEUES = """
SELECT w.team_id, w.id, w.name, v.max_parallel_executions, v.on_limit,
       count(e.id) FILTER (WHERE e.status IN ('pending', 'running')),
       count(e.id) FILTER (WHERE e.status = 'queued'),
       min(e.created_at) FILTER (WHERE e.status = 'queued')
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  LEFT JOIN executions_execution e
    ON e.workflow_id = w.id AND e.status IN ('queued', 'pending', 'running')
 WHERE w.team_id = ANY(%(team_ids)s)
 GROUP BY w.team_id, w.id, w.name, v.max_parallel_executions, v.on_limit
 ORDER BY w.name
"""

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


@dataclass(frozen=True)
class WorkflowQueue:
    id: int
    name: str
    max_parallel_executions: int
    on_limit: str
    running: int
    queued: int
    oldest_queued_at: datetime | None


@dataclass(frozen=True)
class TeamQueues:
    team: Team
    limit: int
    running: int
    queued: int
    workflows: list[WorkflowQueue]


def team_queues(*, team: Team) -> TeamQueues:
    return teams_queues(teams=[team])[0]


def teams_queues(*, teams: Iterable[Team]) -> list[TeamQueues]:
    """The queues of several teams in one query, in the order of `teams`."""
    teams = list(teams)
    by_team: dict[int, list[WorkflowQueue]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(_QUEUES, {"team_ids": [t.id for t in teams]})
        for team_id, *row in cursor.fetchall():
            by_team[team_id].append(WorkflowQueue(*row))
    return [
        TeamQueues(
            team=team,
            limit=team.effective_limit,
            running=sum(w.running for w in by_team[team.id]),
            queued=sum(w.queued for w in by_team[team.id]),
            workflows=by_team[team.id],
        )
        for team in teams
    ]
