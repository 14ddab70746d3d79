"""The engine's clock: the reaper every `engine.reaper_interval`, the backup promotion poller
every `engine.queue_poll_interval`, cron triggers every second and the dashboard's queue samples
every 20 s.

django-q2's scheduler only looks at its schedules every 30 s (its guard loop), too coarse for
sub-minute intervals. So the clock is a task that ticks in a loop for SPAN seconds and then
enqueues its successor with its state (when each job last ran). One clock runs at a time across
all clusters: it holds a session advisory lock, which PostgreSQL releases if its worker dies; a
clock that cannot take the lock returns at once. The django-q2 schedule `mantle-engine-clock`
(every minute, see schedules.py) restarts the chain if it was broken, and start-up kicks it.
SPAN is short so that stopping a cluster never waits long for the clock's worker.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection

from core import locks
from engine import cron, dispatch, reaper
from executions.services import promotion, queue_samples

SPAN = 2.0  # seconds one link of the chain runs
RESOLUTION = 0.25  # seconds between looks at what is due
CRON_INTERVAL = 1.0
QUEUE_SAMPLE_INTERVAL = 20.0  # the dashboard's queue-depth chart has one-minute buckets

logger = logging.getLogger(__name__)


def run(state: dict[str, Any] | None = None) -> bool:
    """Run one link of the clock; False when another clock holds the lock."""
    state = dict(state or {})
    with locks.session_lock(locks.Namespace.ENGINE_TICKER) as held:
        if not held:
            return False
        end = time.monotonic() + SPAN
        while time.monotonic() < end:
            try:
                tick(state)
            except Exception:
                # One failed pass (e.g. the database restarting) must not stop the clock.
                logger.exception("engine clock tick failed")
                connection.close()
            time.sleep(RESOLUTION)
    dispatch.start_clock(state)
    return True


def tick(state: dict[str, Any]) -> None:
    """Run what is due; `state` keeps when each job last ran (epoch seconds)."""
    engine = settings.MANTLE.engine
    now = time.time()
    if _due(state, "reaper", engine.reaper_interval, now):
        reaper.reap()
    if _due(state, "poller", engine.queue_poll_interval, now):
        promotion.queue_promote_all(trigger="poller")
    if _due(state, "queue_samples", QUEUE_SAMPLE_INTERVAL, now):
        queue_samples.queue_sample_record()
    if _due(state, "cron", CRON_INTERVAL, now):
        since = state.get("cron_until", now)
        cron.admit_due(
            since=datetime.fromtimestamp(since, UTC), until=datetime.fromtimestamp(now, UTC)
        )
        state["cron_until"] = now


def _due(state: dict[str, Any], job: str, interval: float, now: float) -> bool:
    if now - state.get(job, 0.0) < interval:
        return False
    state[job] = now
    return True
