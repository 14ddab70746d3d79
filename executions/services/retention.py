"""Retention (docs/operations.md, Retention): the pruning pass, run by the django-q2 schedule
`mantle-prune` (engine/schedules.py) and by `mantle prune [--dry-run]`.

Per workflow, its current version's horizons (`retention:` in its YAML) or mantle.yaml's: a
completed execution is deleted once finished longer than `completed` ago, a failed, cancelled
or timed-out one than `failed` (0 keeps them for ever), with its steps first. Rejections and
finished bulk actions go after the `failed` horizon, the dashboard's queue samples after
QUEUE_SAMPLES_KEPT (its chart shows the last hour). Every statement deletes at most BATCH rows
(an execution with its steps in one statement, retention.sql) and is its own transaction, so no
pass holds a lock longer than one batch, and admission and promotion (which never touch finished
rows) never wait on it. The pass is paced: after each batch it sleeps so that it deletes for at
most DUTY of its time, leaving the database's CPU and WAL to admission (docs/operations.md,
Retention).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from executions import metrics
from executions.models import Status
from executions.sql import queries
from executions.sql.rows import rows_as
from workflows.models import WorkflowDefinition

BATCH = 1000
# The share of a pass's time spent deleting; it sleeps the rest. A deleting batch takes a core
# from admission while it runs: at 0.5 the hot team admitted at 0.64-0.83 of its rate during a
# pass on 2 cores, at 0.25-0.3 at 1.0-1.3 (docs/performance.md, figure 11).
DUTY = 0.3
QUEUE_SAMPLES_KEPT = timedelta(hours=2)
COMPLETED = [Status.COMPLETED.value]
FAILED = [Status.FAILED.value, Status.CANCELLED.value, Status.TIMED_OUT.value]


@dataclass(frozen=True)
class Expired:
    """What a workflow's pass would delete (retention.sql, expired_count)."""

    executions: int
    steps: int


@dataclass(frozen=True)
class Deleted:
    """One batch (retention.sql, expired_batch_delete); `oversized`: the oldest expired
    execution whose steps alone are more than a batch, none deleted, to thin first."""

    executions: int
    steps: int
    oversized: uuid.UUID | None


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
    pruned: Counter[str] = Counter()
    with connection.cursor() as cursor:
        if dry_run:
            cursor.execute(queries["expired_count"], params)
            (expired,) = rows_as(cursor, Expired)
            return Counter({"executions": expired.executions, "steps": expired.steps})
        # Executions looked at per batch: as many as fit BATCH rows with the last batch's steps
        # per execution (the statement keeps whichever of them fit).
        take = BATCH
        while True:
            began = time.monotonic()
            cursor.execute(queries["expired_batch_delete"], {**params, "take": take})
            (batch,) = rows_as(cursor, Deleted)
            executions, steps = batch.executions, batch.steps
            if batch.oversized is not None:
                cursor.execute(
                    queries["expired_steps_of_delete"],
                    {**params, "execution_id": batch.oversized},
                )
                steps = cursor.rowcount
            if executions == steps == 0:
                return pruned
            _pace(time.monotonic() - began)
            pruned.update(executions=executions, steps=steps)
            if executions:
                take = max(1, min(BATCH, BATCH * executions // (executions + steps)))


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
        began = time.monotonic()
        cursor.execute(statement, params)
        if cursor.rowcount <= 0:
            return deleted
        _pace(time.monotonic() - began)
        deleted += cursor.rowcount


def _pace(busy: float) -> None:
    """Sleep after a batch that took `busy` seconds, so the pass deletes DUTY of its time."""
    time.sleep(busy * (1 - DUTY) / DUTY)
