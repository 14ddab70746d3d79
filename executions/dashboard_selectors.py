"""The dashboard's reads of executions (executions/sql/dashboard.sql) as typed rows, for a list
of teams in four statements; dashboard/panels.py orders and groups them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from executions.sql import queries
from executions.sql.rows import rows_as


@dataclass(frozen=True)
class RejectionCount:
    team_id: int
    workflow_id: int
    count: int  # in the last hour


@dataclass(frozen=True)
class DepthSample:
    workflow_id: int
    minutes_ago: int  # 0: the current minute
    queued: int  # the deepest sample of that minute


@dataclass(frozen=True)
class QueuedRow:
    id: uuid.UUID
    team_id: int
    workflow: str
    rank: int | None  # in its workflow's fair order; None: waiting out a debounce
    blocked_by: str | None
    wait_seconds: float
    blocked_by_limit: str | None  # the named limit, when blocked_by is "limit"
    concurrency_key: str
    not_before: datetime | None  # a debounce's due time
    priority: int
    created_at: datetime


@dataclass(frozen=True)
class RunningExecution:
    id: uuid.UUID
    team_id: int
    workflow: str
    status: str
    elapsed_seconds: float
    steps_done: int
    steps_total: int
    steps_waiting: int  # for step-scope limits
    waiting_for: str | None  # those limits' names


@dataclass(frozen=True)
class DashboardRows:
    rejections: list[RejectionCount]
    depth: list[DepthSample]
    queued: list[QueuedRow]  # each team's first `rows_per_team` of each queued workflow
    running: list[RunningExecution]  # each team's first `rows_per_team`, oldest first


def dashboard_rows(*, team_ids: list[int], rows_per_team: int) -> DashboardRows:
    params: dict[str, Any] = {
        "team_ids": team_ids,
        "limit": rows_per_team,
        "window": timedelta(hours=1),
    }
    with connection.cursor() as cursor:
        cursor.execute(queries["dashboard_rejections"], params)
        rejections = rows_as(cursor, RejectionCount)
        cursor.execute(queries["dashboard_depth"], params)
        depth = rows_as(cursor, DepthSample)
        cursor.execute(queries["dashboard_queued"], params)
        queued = rows_as(cursor, QueuedRow)
        cursor.execute(queries["dashboard_running"], params)
        running = rows_as(cursor, RunningExecution)
    return DashboardRows(rejections, depth, queued, running)
