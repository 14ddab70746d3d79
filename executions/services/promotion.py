"""Promotion: queued → pending, as far as free team, named limit, workflow and key slots allow:
within a workflow its keys round-robin, the least recently promoted key first, oldest first
within a key (promotion.sql's fair_queue_heads, read through mantle_fair_heads.sql at a cost
flat in the number of keys); across the team's workflows the oldest head first.

Runs after the commit of every terminal transition (signals.py), when a limit is raised, from
the engine clock for queues waiting for a rate window, from a resume, and from the backup poller.
Same lock order as admission: team, then the named limits its queue holds in name order, then
its queued workflows in id order. A paused team, workflow or named limit has no free slot
(services/pauses.py).
"""

from __future__ import annotations

import heapq
import logging
import math
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from django.db import OperationalError, connection, transaction
from django.db.backends.utils import CursorWrapper

from core import locks
from executions import metrics
from executions.services.queue_timeouts import queue_expire
from executions.sql import queries
from teams.models import effective_team_limit

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _QueuedWorkflow:
    id: int
    name: str
    free: float
    per_key: int
    rate_max: int
    rate_period: float | None
    rate_per_key: bool

    @classmethod
    def from_row(cls, row: tuple) -> _QueuedWorkflow:
        """A promotion_state row: a rate not per key bounds the workflow's free slots by the
        room in its window; a paused workflow (or team) has none."""
        id_, name, limit, per_key, holders = row[:5]
        rate_max, rate_period, rate_per_key, window, paused = row[8:13]
        free = 0 if paused else _free(holders, limit)
        if rate_max and not rate_per_key:
            free = min(free, max(0, rate_max - window))
        return cls(id_, name, free, per_key, rate_max, rate_period, rate_per_key)


def queue_promote(team_id: int, *, trigger: str) -> list[uuid.UUID]:
    """Promote what fits for one team; return the promoted execution ids."""
    with transaction.atomic():
        locks.lock_team(team_id)
        with connection.cursor() as cursor:
            limit_sets = _queued_limit_sets(cursor, team_id)
            if not limit_sets:
                return []
            workflow_ids = sorted(limit_sets)
            held = {limit_id for sets in limit_sets.values() for held in sets for limit_id in held}
            cursor.execute(queries["named_limits_in_lock_order"], {"limit_ids": sorted(held)})
            limit_ids = [row[0] for row in cursor.fetchall()]
            locks.lock_named_limits(limit_ids)
            locks.lock_workflows(workflow_ids)
            cursor.execute(queries["named_limits_state"], {"limit_ids": limit_ids})
            limits_free = {
                limit_id: 0 if paused else _free(holders, max_)
                for limit_id, max_, holders, paused in cursor
            }
            cursor.execute(queries["promotion_state"], {"workflow_ids": workflow_ids})
            rows = cursor.fetchall()
            team_slug, team_override, team_holders = rows[0][5:8]
            team_free = _free(team_holders, effective_team_limit(team_override))
            workflows = [_QueuedWorkflow.from_row(row) for row in rows]
            rooms = {w: _named_room(sets, limits_free) for w, sets in limit_sets.items()}
            chosen = _fair_heads(cursor, workflows, team_free, limits_free, rooms)
            promoted = []
            if chosen:
                cursor.execute(queries["promote"], {"ids": chosen})
                promoted = cursor.fetchall()
            team_full = team_free - len(promoted) <= 0
            cursor.execute(queries["relabel_queue"], {"team_id": team_id, "team_full": team_full})
        names = {w.id: w.name for w in workflows}
        waits = [(names[workflow_id], wait) for _, workflow_id, wait in promoted]
        promoted_ids = {execution_id for execution_id, _, _ in promoted}
        ids = [execution_id for execution_id in chosen if execution_id in promoted_ids]
        transaction.on_commit(
            lambda: metrics.count_promotions(team=team_slug, trigger=trigger, waits=waits)
        )
    return ids


def queue_promote_after_terminal(team_id: int) -> list[uuid.UUID]:
    """The promotion after a terminal commit: none, and no wait for the team's lock, when
    mantle_promotion_owed finds nothing of the team queued nor about to be by an admission that
    counted the finished execution (mantle_promotion_owed.sql says why that is safe). An
    unlimited team with no queue then finishes executions without its lock: the convoy of
    completions behind its admissions is gone (docs/performance.md, Keys at scale)."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["promotion_owed"],
            {"team_id": team_id, "team_namespace": locks.Namespace.TEAM},
        )
        (owed,) = cursor.fetchone()
    if not owed:
        return []
    return queue_promote(team_id, trigger="completion")


def queue_promote_all(*, trigger: str) -> int | None:
    """The backup poller: end what queued past its queue_timeout, then promote for every team
    with a queue. None when another run holds the poller lock (overlapping runs skip rather than
    queue up)."""
    with transaction.atomic():
        if not locks.try_lock(locks.Namespace.POLLER):
            return None
        queue_expire()
        with connection.cursor() as cursor:
            cursor.execute(queries["teams_with_queue"])
            team_ids = sorted(row[0] for row in cursor.fetchall())
        promoted = 0
        for team_id in team_ids:
            try:
                promoted += len(queue_promote(team_id, trigger=trigger))
            except OperationalError as error:
                # One team's lock held past lock_timeout must not cost every other team its
                # backup promotion: queue_promote's savepoint rolled back, the pass goes on.
                if not locks.is_busy(error):
                    raise
                logger.warning("poller skipped team %s: its lock is busy", team_id)
        logger.info("poller pass: %d promoted, %d teams with a queue", promoted, len(team_ids))
        return promoted


def queue_promote_waiting_for_time() -> int:
    """The engine clock's pass (every RESOLUTION): promote the teams with a queue in a workflow
    that has a rate limit, or a debounced execution now due, so one is promoted within a tick of
    the moment its window admits it or its debounce passes."""
    with connection.cursor() as cursor:
        cursor.execute(queries["teams_waiting_for_time"])
        team_ids = sorted(row[0] for row in cursor.fetchall())
    return sum(len(queue_promote(team_id, trigger="clock")) for team_id in team_ids)


def _queued_limit_sets(cursor: CursorWrapper, team_id: int) -> dict[int, set[frozenset[int]]]:
    """Per workflow with a queue, the distinct sets of named limits its queued executions hold.
    Read under the team's lock, which every admission takes first: no execution joins the queue
    meanwhile (one may leave it, which only makes a set of one more certain)."""
    cursor.execute(queries["queued_limit_sets"], {"team_id": team_id})
    limit_sets: dict[int, set[frozenset[int]]] = {}
    for workflow_id, named_limits in cursor.fetchall():
        limit_sets.setdefault(workflow_id, set()).add(frozenset(named_limits))
    return limit_sets


def _free(holders: int, limit: int) -> float:
    return math.inf if limit == 0 else max(0, limit - holders)


def _named_room(limit_sets: set[frozenset[int]], limits_free: dict[int, float]) -> float:
    """How many of a workflow's queue in fair order can matter to promotion, given the named
    limits its queued executions hold: when they all hold the same set, the smallest free of
    that set (infinite for none); when the sets differ, no bound.

    Exact, not a guess: _fair_heads takes a workflow's candidates in its fair order and passes
    one over only when one of its limits has no free slot left, and free slots only fall during
    the merge. With one set, the first passed over leaves every later one of the workflow
    passed over too, so what it takes is a prefix of its order, no longer than the smallest
    free: the rows after it change nothing. With different sets, one passed over for a limit the
    next does not hold does not stop the next, so no prefix is enough."""
    if len(limit_sets) != 1:
        return math.inf
    (held,) = limit_sets
    return min((limits_free[limit_id] for limit_id in held), default=math.inf)


Head = TypeVar("Head", bound=tuple[int, datetime, uuid.UUID, object])


def across_workflows(queues: Iterable[list[Head]]) -> Iterator[Head]:
    """The workflows' queues, each (-priority, created_at, id, …) in its fair order, merged as
    promotion takes them: the workflow whose next one has the higher priority, then is the
    older, first. heapq.merge compares the heads of its lists only: each keeps its fair order."""
    return heapq.merge(*queues)


def _fair_heads(
    cursor: CursorWrapper,
    workflows: list[_QueuedWorkflow],
    team_free: float,
    limits_free: dict[int, float],
    named_rooms: dict[int, float],
) -> list[uuid.UUID]:
    """The queued executions that fit: at most `free` per workflow in its fair order (read no
    further than its named room), at most `team_free` in all, each taking one free slot of every
    named limit it holds (one that finds a limit full is passed over), the workflow whose next
    one has the higher priority, then is the older, first."""
    candidates: list[list[tuple[int, datetime, uuid.UUID, list[int]]]] = []
    for workflow in workflows:
        take = min(workflow.free, team_free, named_rooms[workflow.id])
        if take <= 0:
            continue
        cursor.execute(
            queries["fair_heads"],
            {
                "workflow_id": workflow.id,
                "per_key": workflow.per_key,
                "stored_key_limits": True,
                "limit": None if math.isinf(take) else int(take),
                "rate_per_key": workflow.rate_per_key and workflow.rate_max > 0,
                "rate_max": workflow.rate_max,
                "rate_period": workflow.rate_period,
            },
        )
        candidates.append(
            [
                (-priority, created_at, id_, limits)
                for id_, priority, created_at, limits, _ in cursor
            ]
        )
    chosen: list[uuid.UUID] = []
    for _, _, execution_id, limit_ids in across_workflows(candidates):
        if len(chosen) >= team_free:
            break
        if any(limits_free[limit_id] <= 0 for limit_id in limit_ids):
            continue
        for limit_id in limit_ids:
            limits_free[limit_id] -= 1
        chosen.append(execution_id)
    return chosen
