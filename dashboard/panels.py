"""What the dashboard shows: the queues of the teams a user may see, with their named limits,
rate windows, recent rejections, queue-depth history, the queued (with what blocks each) and
running executions in order, and the progress of bulk actions."""

from __future__ import annotations

import heapq
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from executions.dashboard_selectors import QueuedRow, RunningExecution, dashboard_rows
from executions.models import BulkAction, BulkStatus
from executions.selectors import (
    KeyQueue,
    NamedLimitUsage,
    WorkflowQueue,
    named_limit_usage,
    teams_busiest_keys,
    teams_queues,
)
from teams.models import Team

# The admin's permissions: viewing executions, and changing them (its cancel action).
VIEW_EXECUTIONS = "executions.view_execution"
CANCEL_EXECUTIONS = "executions.change_execution"


def teams_visible_to(*, user: User) -> QuerySet[Team]:
    """Who may view executions in the admin sees every team; others the teams they are
    members of (being staff is not enough)."""
    if user.has_perm(VIEW_EXECUTIONS):
        return Team.objects.all()
    return Team.objects.filter(members=user)


def team_ids_cancellable_by(*, user: User, team_ids: Iterable[int]) -> set[int]:
    """Of these teams, those whose executions the user may cancel: all of them for who may
    cancel in the admin, else the teams the user is a member of."""
    team_ids = set(team_ids)
    if user.has_perm(CANCEL_EXECUTIONS):
        return team_ids
    return set(Team.objects.filter(members=user, id__in=team_ids).values_list("id", flat=True))


@dataclass(frozen=True)
class QueuedExecution:
    id: uuid.UUID
    team_id: int
    workflow: str
    position: int  # in the order promotion takes the team's whole queue, from 1
    blocked_by: str | None
    wait_seconds: float
    blocked_by_limit: str | None  # the named limit, when blocked_by is "limit"
    concurrency_key: str
    not_before: datetime | None  # a debounce's due time


@dataclass(frozen=True)
class KeyPanel:
    queue: KeyQueue
    oldest_wait_seconds: float | None


@dataclass(frozen=True)
class WorkflowPanel:
    queue: WorkflowQueue
    rejected_last_hour: int
    oldest_wait_seconds: float | None
    depth_per_minute: list[int]  # oldest minute first; the last one is the live depth
    busiest_keys: list[KeyPanel]  # the 20 keys with the longest queues, longest first


@dataclass(frozen=True)
class TeamPanel:
    team: Team
    limit: int
    running: int
    queued: int
    rejected_last_hour: int
    named_limits: list[NamedLimitUsage]
    workflows: list[WorkflowPanel]
    queued_executions: list[QueuedExecution]
    running_executions: list[RunningExecution]
    # Running bulk actions and those finished in the last hour, newest first.
    bulk_actions: list[BulkAction]


CHART_MINUTES = 60
BULK_SHOWN = 5


def dashboard_panels(
    *, teams: Iterable[Team], now: datetime, rows_per_team: int = 50
) -> list[TeamPanel]:
    """Everything the dashboard shows for these teams, in a fixed number of queries."""
    queues = teams_queues(teams=teams)
    keys = teams_busiest_keys(teams=[q.team for q in queues])
    named_limits: dict[str, list[NamedLimitUsage]] = defaultdict(list)
    for usage in named_limit_usage(teams=[q.team for q in queues]):
        named_limits[usage.team].append(usage)
    team_ids = [q.team.id for q in queues]
    rows = dashboard_rows(team_ids=team_ids, rows_per_team=rows_per_team)
    rejections = {(r.team_id, r.workflow_id): r.count for r in rows.rejections}
    depth: dict[int, list[int]] = defaultdict(lambda: [0] * CHART_MINUTES)
    for sample in rows.depth:
        if 0 <= sample.minutes_ago < CHART_MINUTES:
            depth[sample.workflow_id][CHART_MINUTES - 1 - sample.minutes_ago] = sample.queued
    queued = _in_promotion_order(rows.queued, rows_per_team)
    running: dict[int, list[RunningExecution]] = defaultdict(list)
    for execution in rows.running:
        running[execution.team_id].append(execution)
    bulk: dict[int, list[BulkAction]] = defaultdict(list)
    recent = Q(status=BulkStatus.RUNNING) | Q(finished_at__gte=now - timedelta(hours=1))
    for action in BulkAction.objects.filter(recent, team_id__in=team_ids).order_by("-created_at"):
        if len(bulk[action.team_id]) < BULK_SHOWN:
            bulk[action.team_id].append(action)
    panels = []
    for queue in queues:
        workflows = []
        for w in queue.workflows:
            series = depth[w.id]
            series[-1] = w.queued
            rejected = rejections.get((queue.team.id, w.id), 0)
            busiest = [KeyPanel(k, _wait(now, k.oldest_queued_at)) for k in keys[w.id]]
            workflows.append(
                WorkflowPanel(w, rejected, _wait(now, w.oldest_queued_at), series, busiest)
            )
        panels.append(
            TeamPanel(
                team=queue.team,
                limit=queue.limit,
                running=queue.running,
                queued=queue.queued,
                rejected_last_hour=sum(p.rejected_last_hour for p in workflows),
                # A global limit (team "") shows in every team's panel: its steps may use it.
                named_limits=named_limits[queue.team.slug] + named_limits[""],
                workflows=workflows,
                queued_executions=queued[queue.team.id],
                running_executions=running[queue.team.id],
                bulk_actions=bulk[queue.team.id],
            )
        )
    return panels


def _in_promotion_order(rows: list[QueuedRow], limit: int) -> dict[int, list[QueuedExecution]]:
    """The queued rows per team, numbered in the order promotion would take them were every
    slot free: the workflows' fair orders merged as queue_promote merges them, then what waits
    out a debounce, the soonest due first."""
    fair: dict[int, dict[str, list[QueuedRow]]] = defaultdict(lambda: defaultdict(list))
    debounced: dict[int, list[QueuedRow]] = defaultdict(list)
    for row in rows:
        if row.rank is None:
            debounced[row.team_id].append(row)
        else:
            fair[row.team_id][row.workflow].append(row)
    teams: dict[int, list[QueuedExecution]] = defaultdict(list)
    for team_id in fair.keys() | debounced.keys():
        queues = [
            [(-r.priority, r.created_at, r.id, r) for r in sorted(queue, key=attrgetter("rank"))]
            for queue in fair[team_id].values()
        ]
        waiting = sorted(debounced[team_id], key=attrgetter("not_before", "id"))
        # The workflows' fair orders merged as mantle_promote merges them: the workflow whose
        # next one has the higher priority, then is the older, first; heapq.merge compares the
        # heads of its lists only, so each keeps its fair order.
        ordered = [head[3] for head in heapq.merge(*queues)] + waiting
        teams[team_id] = [
            QueuedExecution(
                id=r.id,
                team_id=r.team_id,
                workflow=r.workflow,
                position=n,
                blocked_by=r.blocked_by,
                wait_seconds=r.wait_seconds,
                blocked_by_limit=r.blocked_by_limit,
                concurrency_key=r.concurrency_key,
                not_before=r.not_before,
            )
            for n, r in enumerate(ordered[:limit], start=1)
        ]
    return teams


def _wait(now: datetime, since: datetime | None) -> float | None:
    return (now - since).total_seconds() if since else None
