"""Promotion: queued → pending, as far as free team, named limit, workflow and key slots allow,
decided whole in the database by mantle_promote (executions/sql/mantle_promote.sql) with the
same rules as admission (executions/sql/mantle_room.sql; docs/architecture.md, Where the rules
live): within a workflow its keys round-robin, the least recently promoted key first, oldest
first within a key; across the team's workflows the oldest head first.

Runs after the commit of every terminal transition (signals.py), when a limit is raised, from
the engine clock for queues waiting for a rate window, from a resume, and from the backup poller.
mantle_promote takes admission's locks in admission's order: team, then the named limits its
queue holds in name order, then its queued workflows in id order. A paused team, workflow or
named limit has no free slot (services/pauses.py).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db import OperationalError, connection, transaction

from core import locks
from executions import metrics
from executions.services.queue_timeouts import queue_expire
from executions.sql import queries
from executions.sql.rows import rows_as
from teams.models import effective_team_limit

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Promoted:
    """A row of mantle_promote: one execution it promoted."""

    id: uuid.UUID
    workflow_id: int
    workflow_name: str
    team_slug: str
    waited: timedelta


def queue_promote(team_id: int, *, trigger: str) -> list[uuid.UUID]:
    """Promote what fits for one team; return the promoted execution ids, in the order they
    were chosen."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            queries["promote_team"],
            {
                "team_id": team_id,
                "default_team_limit": effective_team_limit(None),
                "team_namespace": locks.Namespace.TEAM,
                "limit_namespace": locks.Namespace.NAMED_LIMIT,
                "workflow_namespace": locks.Namespace.WORKFLOW,
                "lock_timeout": f"{locks.LOCK_TIMEOUT_MS}ms",
            },
        )
        promoted = rows_as(cursor, Promoted)
        if promoted:
            team = promoted[0].team_slug
            waits = [(row.workflow_name, row.waited) for row in promoted]
            transaction.on_commit(
                lambda: metrics.count_promotions(team=team, trigger=trigger, waits=waits)
            )
    return [row.id for row in promoted]


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
