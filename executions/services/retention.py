"""Retention (docs/operations.md, Retention): the pruning pass, run by the django-q2 schedule
`mantle-prune` (engine/schedules.py) and by `mantle prune [--dry-run]`.

Per workflow, its current version's horizons (`retention:` in its YAML) or mantle.yaml's: a
completed execution is deleted once finished longer than `completed` ago, a failed, cancelled
or timed-out one than `failed` (0 keeps them for ever), with its steps first. Rejections and
finished bulk actions go after the `failed` horizon, the dashboard's queue samples after
QUEUE_SAMPLES_KEPT (its chart shows the last hour). Every statement deletes at most BATCH rows
and is its own transaction, so no pass holds a lock longer than one batch, and admission and
promotion (which never touch finished rows) never wait on it.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from executions import metrics
from executions.models import Status
from executions.sql import queries
from workflows.models import WorkflowDefinition

BATCH = 1000
QUEUE_SAMPLES_KEPT = timedelta(hours=2)
COMPLETED = [Status.COMPLETED.value]
FAILED = [Status.FAILED.value, Status.CANCELLED.value, Status.TIMED_OUT.value]


def prune(*, dry_run: bool = False, now: datetime | None = None) -> Counter[str]:
    """Delete (or, dry run, count) what is past its horizon `now` (by default, now): rows per
    table."""
    now = now or timezone.now()
    default = settings.MANTLE.retention
    pruned: Counter[str] = Counter()
    workflows = WorkflowDefinition.objects.select_related("current_version")
    for workflow in workflows:
        version = workflow.current_version
        own = (version.retention_completed, version.retention_failed) if version else (None, None)
        for statuses, horizon, fallback in (
            (COMPLETED, own[0], default.completed),
            (FAILED, own[1], default.failed),
        ):
            seconds = fallback if horizon is None else horizon.total_seconds()
            if seconds > 0:
                cutoff = now - timedelta(seconds=seconds)
                pruned += _expired(workflow.id, statuses, cutoff, dry_run=dry_run)
    if default.failed > 0:
        cutoff = now - timedelta(seconds=default.failed)
        pruned += _older("rejections", cutoff, dry_run=dry_run)
        pruned += _older("bulk_actions", cutoff, dry_run=dry_run)
    pruned += _older("queue_samples", now - QUEUE_SAMPLES_KEPT, dry_run=dry_run)
    if not dry_run:
        for table, rows in pruned.items():
            metrics.count_pruned(table=table, rows=rows)
    return pruned


def _expired(
    workflow_id: int, statuses: list[str], cutoff: datetime, *, dry_run: bool
) -> Counter[str]:
    params: dict[str, Any] = {
        "workflow_id": workflow_id,
        "statuses": statuses,
        "cutoff": cutoff,
        "batch": BATCH,
    }
    with connection.cursor() as cursor:
        if dry_run:
            cursor.execute(queries["expired_count"], params)
            executions, steps = cursor.fetchone()
            return Counter({"executions": executions, "steps": steps})
        return Counter(
            {
                "steps": _in_batches(cursor, queries["expired_steps_delete"], params),
                "executions": _in_batches(cursor, queries["expired_executions_delete"], params),
            }
        )


def _older(table: str, cutoff: datetime, *, dry_run: bool) -> Counter[str]:
    """Rows of `table` (rejections, bulk_actions, queue_samples) from before `cutoff`."""
    count, delete = {
        "rejections": (queries["expired_rejections_count"], queries["expired_rejections_delete"]),
        "bulk_actions": (
            queries["expired_bulk_actions_count"],
            queries["expired_bulk_actions_delete"],
        ),
        "queue_samples": (
            queries["expired_queue_samples_count"],
            queries["expired_queue_samples_delete"],
        ),
    }[table]
    params: dict[str, Any] = {"cutoff": cutoff, "batch": BATCH}
    with connection.cursor() as cursor:
        if dry_run:
            cursor.execute(count, params)
            return Counter({table: cursor.fetchone()[0]})
        return Counter({table: _in_batches(cursor, delete, params)})


def _in_batches(cursor: CursorWrapper, statement: str, params: dict[str, Any]) -> int:
    """Run a deleting statement (autocommit: each its own transaction) until it deletes none."""
    deleted = 0
    while True:
        cursor.execute(statement, params)
        if cursor.rowcount <= 0:
            return deleted
        deleted += cursor.rowcount
