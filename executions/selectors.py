"""Reads of executions and their queues, for the API, the CLI and the dashboard."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Count, Q, QuerySet

from executions.models import Execution, Status, StepExecution, StepStatus
from executions.sql import queries
from executions.sql.rows import rows_as, rows_grouped
from teams.models import Team


@dataclass(frozen=True)
class NamedLimitUsage:
    team: str  # "" for a global limit
    name: str
    max: int  # 0: unlimited
    in_use: int  # slot holders, across every workflow that lists it
    queued: int  # executions queued waiting for it (blocked_by "limit")
    scope: str  # "team" or "global"
    units_in_use: int  # held by running steps that list it (step scope)
    waiting_steps: int  # steps waiting for it
    oldest_waiting_at: datetime | None
    paused: bool


def named_limit_usage(
    *, teams: Iterable[Team] | None = None, with_global: bool = True
) -> list[NamedLimitUsage]:
    """The named limits of the teams (None: of every team) and the global ones (unless not
    `with_global`) with their live use, by team slug (global last) and name. One query."""
    team_ids = None if teams is None else [team.id for team in teams]
    with connection.cursor() as cursor:
        cursor.execute(
            queries["named_limit_usage"], {"team_ids": team_ids, "with_global": with_global}
        )
        return rows_as(cursor, NamedLimitUsage)


@dataclass(frozen=True)
class _QueuePosition:
    id: uuid.UUID
    position: int


def execution_queue_positions(*, executions: Iterable[Execution]) -> dict[uuid.UUID, int]:
    """The 1-based place of each queued one of `executions` in its workflow's FIFO queue; the
    others have none. One query."""
    queued = [e.id for e in executions if e.status == Status.QUEUED]
    if not queued:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(queries["queue_positions"], {"ids": queued})
        return {row.id: row.position for row in rows_as(cursor, _QueuePosition)}


def execution_replays(*, executions: Iterable[Execution]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """The replays of each of `executions` (services/replay.py), oldest first. One query."""
    replays: dict[uuid.UUID, list[uuid.UUID]] = {}
    rows = Execution.objects.filter(replay_of_id__in=[e.id for e in executions])
    for original, replay in rows.order_by("created_at", "id").values_list("replay_of_id", "id"):
        replays.setdefault(original, []).append(replay)
    return replays


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
    return list(executions[:limit])


def execution_get(*, team: Team, execution_id: uuid.UUID) -> Execution | None:
    """One of the team's executions, without its steps (a fan-out has up to
    limits.fanout_items of them: read them a page at a time); None when absent or another
    team's."""
    return _executions(team).filter(id=execution_id).first()


# What a step shows: not a fan-out parent's `items` (up to limits.fanout_items of them).
STEP_FIELDS = (
    "id",
    "name",
    "fanout_index",
    "status",
    "attempt",
    "output",
    "error",
    "started_at",
    "completed_at",
)


def execution_steps(
    *, execution: Execution, limit: int, after: int | None = None, status: str | None = None
) -> list[StepExecution]:
    """A page of the execution's steps in the order they were created; `after` is the id of the
    last one seen."""
    steps = StepExecution.objects.filter(execution=execution).only(*STEP_FIELDS).order_by("id")
    if after is not None:
        steps = steps.filter(id__gt=after)
    if status is not None:
        steps = steps.filter(status=status)
    return list(steps[:limit])


@dataclass(frozen=True)
class _BlockedBy:
    id: int
    kind: str  # "limit" or "rate"
    name: str


def steps_blocked_by(*, steps: Iterable[StepExecution]) -> dict[int, tuple[str, str]]:
    """What each waiting one of `steps` waits for, by step id: ("limit" or "rate", its name).
    One query."""
    waiting = [step.id for step in steps if step.status == StepStatus.WAITING]
    if not waiting:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_blocked_by"], {"ids": waiting})
        return {row.id: (row.kind, row.name) for row in rows_as(cursor, _BlockedBy)}


def execution_step_counts(*, execution: Execution) -> dict[str, int]:
    """How many of the execution's step rows are in each status (a fan-out's branches count
    once created, and they are created as they become runnable)."""
    counts = (
        StepExecution.objects.filter(execution=execution)
        .order_by()
        .values_list("status")
        .annotate(n=Count("*"))
    )
    return dict(sorted(counts))


def execution_by_idempotency_key(*, team: Team, key: str) -> Execution | None:
    return _executions(team).filter(idempotency_key=key).first()


@dataclass(frozen=True)
class WorkflowQueue:
    id: int
    name: str
    max_parallel_executions: int
    on_limit: str
    max_parallel_per_key: int
    running: int
    queued: int
    oldest_queued_at: datetime | None
    rate_max: int  # 0: no rate limit
    rate_period_seconds: float | None
    rate_per_key: bool
    rate_in_window: int  # became pending in the trailing rate_period; 0 when per key
    debounced: int  # queued, waiting out a debounce
    next_debounce_due: datetime | None
    paused_by: str | None  # the pause holding its newcomers: "team", "workflow", "limit"

    @property
    def paused_itself(self) -> bool:
        """Its own pause (not its team's or a named limit's)."""
        return self.paused_by == "workflow"


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
    with connection.cursor() as cursor:
        cursor.execute(queries["workflow_queues"], {"team_ids": [t.id for t in teams]})
        by_team = rows_grouped(cursor, "team_id", WorkflowQueue)
    return [
        TeamQueues(
            team=team,
            limit=team.effective_limit,
            running=sum(w.running for w in by_team.get(team.id, [])),
            queued=sum(w.queued for w in by_team.get(team.id, [])),
            workflows=by_team.get(team.id, []),
        )
        for team in teams
    ]


@dataclass(frozen=True)
class KeyQueue:
    key: str
    queued: int
    running: int
    oldest_queued_at: datetime | None
    rate_in_window: int | None  # with a rate per key: became pending in its window; else None


def teams_busiest_keys(*, teams: Iterable[Team]) -> dict[int, list[KeyQueue]]:
    """Per workflow id of the teams, its 20 keys with the longest queues, longest first. One
    query."""
    with connection.cursor() as cursor:
        cursor.execute(queries["busiest_keys"], {"team_ids": [team.id for team in teams]})
        return rows_grouped(cursor, "workflow_id", KeyQueue)


@dataclass(frozen=True)
class _Execution:
    id: uuid.UUID


def executions_past_timeout() -> list[uuid.UUID]:
    """The running executions past their workflow's `timeout`."""
    with connection.cursor() as cursor:
        cursor.execute(queries["executions_past_timeout"])
        return [row.id for row in rows_as(cursor, _Execution)]


def executions_stalled(*, lease: float) -> list[uuid.UUID]:
    """The running executions, started over `lease` seconds ago, where nothing is pending,
    waiting or running: an advance was lost."""
    with connection.cursor() as cursor:
        cursor.execute(queries["executions_stalled"], {"lease": lease})
        return [row.id for row in rows_as(cursor, _Execution)]


def database_read_only() -> bool:
    """Whether the server takes no writes (a standby, e.g. a primary demoted by a failover)."""
    with connection.cursor() as cursor:
        cursor.execute(queries["database_read_only"])
        return bool(cursor.fetchone()[0])
