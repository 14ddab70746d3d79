"""Prometheus metrics of CONTRACT §7 that are events (counters, histograms).

Queue depth and running counts are gauges read from the database at scrape time (see
executions.collectors), so they always equal the database.
"""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import Counter, Histogram

REJECTED = Counter(
    "mantle_executions_rejected",
    "Executions rejected because a concurrency limit was reached.",
    ["team", "workflow", "scope"],
)
EXECUTIONS = Counter(
    "mantle_executions",
    "Executions that reached a terminal status.",
    ["team", "workflow", "status"],
)
PROMOTIONS = Counter(
    "mantle_promotions",
    "Queued executions promoted to pending, by what triggered the promotion.",
    ["trigger"],
)
QUEUE_WAIT = Histogram(
    "mantle_queue_wait_duration_seconds",
    "Time from queued to promoted.",
    ["team", "workflow"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, float("inf")),
)


def count_rejection(*, team: str, workflow: str, scope: str) -> None:
    REJECTED.labels(team=team, workflow=workflow, scope=scope).inc()


def count_terminal(*, team: str, workflow: str, status: str) -> None:
    EXECUTIONS.labels(team=team, workflow=workflow, status=status).inc()


def count_promotions(*, team: str, trigger: str, waits: list[tuple[str, timedelta]]) -> None:
    if not waits:
        return
    PROMOTIONS.labels(trigger=trigger).inc(len(waits))
    for workflow, wait in waits:
        QUEUE_WAIT.labels(team=team, workflow=workflow).observe(wait.total_seconds())
