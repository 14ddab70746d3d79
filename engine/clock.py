"""The engine's clock: what needs a tick finer than django-q2's schedules (engine/schedules.py)
give. The reaper every `engine.reaper_interval`, the backup promotion poller (queue timeouts
first) every `engine.queue_poll_interval`, cron triggers every second, and every tick the
promotion of queues waiting for a rate window or a debounce (a window admits one again, a
debounce passes, at a moment no completion announces), the admission of delayed runs now due,
and the batches of bulk actions.

It runs in a process of its own (`manage.py mantle_clock`, one per `mantle serve` that runs
workers), apart from the step workers: a hung step worker never stops the reaper that recovers
its steps, and no backlog of steps delays a tick. It ticks in one process at a time across all
machines: the one holding a session advisory lock, which PostgreSQL releases when its connection
or process dies; the others try again every STANDBY seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection

from core import locks
from engine import cron, reaper
from executions.services import bulk, promotion, scheduled

RESOLUTION = 0.25  # seconds between looks at what is due
MIN_WAIT = 0.005  # seconds between two ticks at least
STANDBY = 1.0  # seconds between attempts to take the clock over
# Seconds the clock is held before it is taken again: a lock connection lost unnoticed (ticks
# run on other connections) is found out within this.
SPAN = 30.0
CRON_INTERVAL = 1.0
# Seconds without a tick, its lock or a tick having failed, that make an outage: the clock
# could not reach the database. The reaper does not count the leases that ran out then against
# their executions (engine/reaper.py); the latest OUTAGES are kept.
OUTAGE_GAP = 10.0
OUTAGES = 10
# Seconds of bulk actions' batches per tick (executions/services/bulk.py): the other jobs, delayed
# runs included, wait at most this (and one batch) for them.
BULK_BUDGET = 0.5

logger = logging.getLogger(__name__)


def run_forever(stop: threading.Event) -> None:
    """Tick while this process holds the clock, stand by while another does, until `stop`."""
    state: dict[str, Any] = {}
    while not stop.is_set():
        held = False
        try:
            with locks.session_lock(locks.Namespace.ENGINE_TICKER) as lock:
                held = lock.held
                end = time.monotonic() + SPAN
                while held and not stop.is_set() and time.monotonic() < end:
                    # A lock whose connection is gone (a failover) may be another's by now.
                    wait = None if lock.lost() else _tick_safely(state)
                    if wait is None:
                        state["failed"] = True
                        break  # take the lock again: its connection may be gone too
                    stop.wait(wait)
        except Exception:
            state["failed"] = True
            logger.exception("engine clock could not take its lock")
        stop.wait(RESOLUTION if held else STANDBY)
    connection.close()


def _tick_safely(state: dict[str, Any]) -> float | None:
    """The tick's wait until the next (None: it failed)."""
    try:
        return tick(state)
    except Exception:
        # One failed pass (e.g. the database restarting) must not stop the clock.
        logger.exception("engine clock tick failed")
        connection.close()
        return None


def tick(state: dict[str, Any]) -> float:
    """Run what is due; `state` keeps when each job last ran (epoch seconds). Seconds until the
    next tick: RESOLUTION, or less when a delayed run falls due before then, so that its batch
    starts at its time, not up to RESOLUTION later (docs/operations.md, Delayed runs); at least
    MIN_WAIT, so that runs a pass left due (its budget spent) wait for the other jobs' turn
    without a busy loop."""
    engine = settings.MANTLE.engine
    now = time.time()
    outages: list[reaper.Outage] = state.setdefault("outages", [])
    # Failures since the last tick (not another clock's turn: it ticked meanwhile).
    if state.pop("failed", False) and now - state.get("ticked", now) > OUTAGE_GAP:
        outages.append(
            reaper.Outage(
                began=datetime.fromtimestamp(state["ticked"], UTC),
                ended=datetime.fromtimestamp(now, UTC),
            )
        )
        del outages[:-OUTAGES]
    if _due(state, "reaper", engine.reaper_interval, now):
        reaper.reap(outages)
    if _due(state, "poller", engine.queue_poll_interval, now):
        promotion.queue_promote_all(trigger="poller")
    promotion.queue_promote_waiting_for_time()
    scheduled.scheduled_admit_due()
    bulk.bulk_advance(budget=BULK_BUDGET)
    if _due(state, "cron", CRON_INTERVAL, now):
        since = state.get("cron_until", now)
        cron.admit_due(
            since=datetime.fromtimestamp(since, UTC), until=datetime.fromtimestamp(now, UTC)
        )
        state["cron_until"] = now
    next_due = scheduled.scheduled_next_due()
    state["ticked"] = time.time()
    return RESOLUTION if next_due is None else min(RESOLUTION, max(MIN_WAIT, next_due))


def _due(state: dict[str, Any], job: str, interval: float, now: float) -> bool:
    if now - state.get(job, 0.0) < interval:
        return False
    state[job] = now
    return True
