"""Prometheus metrics of docs/api.md that are events (counters, histograms), and the scrape.

Queue depth and running counts are gauges read from the database at scrape time (see
executions.collectors), so they always equal the database.

Several processes count: gunicorn workers (rejections), django-q2 workers and the poller
(promotions, queue waits, terminal executions). With $PROMETHEUS_MULTIPROC_DIR set before
prometheus_client is imported (`mantle serve` sets it for all its children), every process
writes its samples to files there and a scrape sums them all.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from core.processes import process_alive
from executions.collectors import LiveExecutionsCollector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

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
CRON_SKIPS = Counter(
    "mantle_cron_ticks_skipped",
    "Cron ticks skipped because the workflow was paused (on_pause not queue).",
    ["team", "workflow"],
)
PRUNED = Counter(
    "mantle_pruned",
    "Rows deleted by retention (docs/operations.md, Retention), by table.",
    ["table"],
)
QUEUE_WAIT = Histogram(
    "mantle_queue_wait_duration_seconds",
    "Time from queued to promoted.",
    ["team", "workflow"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, float("inf")),
)


def count_rejection(*, team: str, workflow: str, scope: str) -> None:
    REJECTED.labels(team=team, workflow=workflow, scope=scope).inc()


def count_cron_skip(*, team: str, workflow: str) -> None:
    CRON_SKIPS.labels(team=team, workflow=workflow).inc()


def count_pruned(*, table: str, rows: int) -> None:
    if rows:
        PRUNED.labels(table=table).inc(rows)


def count_terminal(*, team: str, workflow: str, status: str) -> None:
    EXECUTIONS.labels(team=team, workflow=workflow, status=status).inc()


def count_promotions(*, team: str, trigger: str, waits: list[tuple[str, timedelta]]) -> None:
    if not waits:
        return
    PROMOTIONS.labels(trigger=trigger).inc(len(waits))
    for workflow, wait in waits:
        QUEUE_WAIT.labels(team=team, workflow=workflow).observe(wait.total_seconds())


def exposition() -> tuple[bytes, str]:
    """The body and content type of a scrape: this process's (or, in multiprocess mode, every
    process's) counters, and the gauges read from the database now."""
    live = CollectorRegistry()
    live.register(LiveExecutionsCollector())
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(live)
        return generate_latest(live), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY) + generate_latest(live), CONTENT_TYPE_LATEST


def prepare_multiprocess_dir(path: Path) -> None:
    """Create the directory and delete the files of processes that are gone (a counter of a
    previous run restarts at 0, as Prometheus expects of a restart). Files are named
    `<kind>_<pid>.db`; those of live processes (another role on this machine) are kept."""
    path.mkdir(parents=True, exist_ok=True)
    for file in path.glob("*.db"):
        pid = file.stem.rpartition("_")[2]
        if not (pid.isdigit() and process_alive(int(pid))):
            file.unlink(missing_ok=True)
