"""Gauges of docs/api.md computed from the database at scrape time, so they always equal it.

One statement reads both per-workflow gauges: the queue depth and the running count of a scrape
come from one snapshot. Every workflow with a current version gets a series, 0 included, and
every named limit a series of its slots in use, of the units its running steps hold and of the
steps waiting for it (docs/limits.md, Step scope); `mantle_paused` one per workflow.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import DatabaseError, connection
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from executions.selectors import named_limit_usage
from executions.sql import queries
from executions.sql.rows import rows_as

logger = logging.getLogger(__name__)


def _families() -> tuple[GaugeMetricFamily, ...]:
    labels = ["team", "workflow"]
    return (
        GaugeMetricFamily(
            "mantle_executions_queued", "Executions waiting in the queue.", labels=labels
        ),
        GaugeMetricFamily(
            "mantle_executions_running",
            "Executions holding a slot (pending or running), as the limits count them.",
            labels=labels,
        ),
        GaugeMetricFamily(
            "mantle_limit_slots_in_use",
            "Slots of a named limit held (pending or running executions that list it).",
            labels=["team", "limit"],
        ),
        GaugeMetricFamily(
            "mantle_limit_units_in_use",
            "Units of a named limit held by running steps that list it (step scope); team is "
            "empty for a global limit.",
            labels=["scope", "team", "limit"],
        ),
        GaugeMetricFamily(
            "mantle_steps_waiting",
            "Steps waiting for a named limit (of any team: by name alone).",
            labels=["limit"],
        ),
        GaugeMetricFamily(
            "mantle_paused",
            "1 while a pause (the workflow's, its team's or a named limit's it lists) holds the "
            "workflow's new executions, else 0.",
            labels=labels,
        ),
    )


@dataclass(frozen=True)
class _LiveCount:
    """A workflow's gauges (live_counts)."""

    team: str
    workflow: str
    queued: int
    running: int  # slot holders
    paused: bool  # a pause holds its newcomers


class LiveExecutionsCollector(Collector):
    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield from _families()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queued, running, limit_slots, units, waiting, paused = _families()
        try:
            with connection.cursor() as cursor:
                cursor.execute(queries["live_counts"])
                rows = rows_as(cursor, _LiveCount)
            limits = named_limit_usage()
        except DatabaseError as exc:
            # The counters are still worth a scrape; absent gauges say "unknown", not 0.
            logger.warning("metrics: database unavailable, gauges skipped: %s", exc)
            return
        for row in rows:
            queued.add_metric([row.team, row.workflow], row.queued)
            running.add_metric([row.team, row.workflow], row.running)
            paused.add_metric([row.team, row.workflow], int(row.paused))
        waiting_by_name: Counter[str] = Counter()
        for limit in limits:
            if limit.scope == "team":
                limit_slots.add_metric([limit.team, limit.name], limit.in_use)
            units.add_metric([limit.scope, limit.team, limit.name], limit.units_in_use)
            waiting_by_name[limit.name] += limit.waiting_steps
        for name, count in sorted(waiting_by_name.items()):
            waiting.add_metric([name], count)
        yield queued
        yield running
        yield limit_slots
        yield units
        yield waiting
        yield paused
