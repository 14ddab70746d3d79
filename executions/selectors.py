"""Reads of the queues, shared by the API (`GET /api/v1/queues`) and the dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from teams.models import Team

# One row per workflow of the team: its current limits and its live counts. Slot holders
# (pending + running) are what the limits count, so they are reported as `running`.
_QUEUES = """
SELECT w.id, w.name, v.max_parallel_executions, v.on_limit,
       count(e.id) FILTER (WHERE e.status IN ('pending', 'running')),
       count(e.id) FILTER (WHERE e.status = 'queued'),
       min(e.created_at) FILTER (WHERE e.status = 'queued')
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  LEFT JOIN executions_execution e
    ON e.workflow_id = w.id AND e.status IN ('queued', 'pending', 'running')
 WHERE w.team_id = %s
 GROUP BY w.id, w.name, v.max_parallel_executions, v.on_limit
 ORDER BY w.name
"""


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
    with connection.cursor() as cursor:
        cursor.execute(_QUEUES, [team.id])
        workflows = [WorkflowQueue(*row) for row in cursor.fetchall()]
    return TeamQueues(
        team=team,
        limit=team.effective_limit,
        running=sum(w.running for w in workflows),
        queued=sum(w.queued for w in workflows),
        workflows=workflows,
    )
