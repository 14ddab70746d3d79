"""Bulk actions (docs/operations.md, Bulk actions): cancel or replay every execution of a team
that a filter matches, at most `limit` of them.

`bulk_create` fixes the matched ids (oldest first) on a BulkAction record, so the count is
exact and a replay made by the action is never matched by it. The engine clock then handles
them in batches (`bulk_advance`): each batch, with the record's progress, is one transaction.
A cancel, or a replay from the failed step, handles each execution through the normal path
(execution_finish, execution_replay: the locks, limits, pauses and promotion of a single cancel
or replay) in a savepoint of its own, BATCH at a time. A replay from the start admits its
REPLAY_BATCH replays in one statement (services/batch_admission.py: each through mantle_admit,
its limits and pauses decided as for a single replay), each inserted linked to its original. A
batch that fails or dies rolls back with its progress, so a restarted clock takes it again and
no execution is handled twice. A replay batch holds its team's admission lock until it
commits, so the batch sizes bound how long it can hold up the team's other admissions.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from executions.models import BulkAction, BulkStatus, Execution, Status
from executions.services.admission import ConcurrencyLimitExceeded
from executions.services.batch_admission import Run, admit_batch
from executions.services.lifecycle import execution_finish
from executions.services.replay import (
    FAILED_STEP,
    LATEST,
    SAME,
    START,
    NotResumable,
    VersionChanged,
    execution_replay,
)
from teams.models import Team
from workflows.models import WorkflowDefinition
from workflows.schema import InvalidInputs

CANCEL, REPLAY = "cancel", "replay"
BATCH = 25
# Replays from the start per batch: admitted in one statement, they hold the team's lock for
# about as long as BATCH replays admitted one by one did.
REPLAY_BATCH = 200
MAX_LIMIT = 100_000
DEFAULT_LIMIT = 10_000
ERRORS_KEPT = 20
CANCELLABLE = (Status.SCHEDULED, Status.QUEUED, Status.PENDING, Status.RUNNING)


@dataclass(frozen=True)
class BulkFilter:
    """What a bulk action matches among its team's executions; None matches any."""

    workflow: WorkflowDefinition | None = None
    status: str | None = None
    concurrency_key: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow.name if self.workflow else None,
            "status": self.status,
            "concurrency_key": self.concurrency_key,
            "created_after": self.created_after.isoformat() if self.created_after else None,
            "created_before": self.created_before.isoformat() if self.created_before else None,
        }


class NotCancellableStatus(Exception):
    def __init__(self, status: str) -> None:
        live = ", ".join(CANCELLABLE)
        super().__init__(f"a {status} execution cannot be cancelled: filter on one of {live}")


def bulk_matching(*, team: Team, action: str, where: BulkFilter) -> QuerySet[Execution]:
    """The executions the action would handle, oldest first. A cancel matches live ones only
    (NotCancellableStatus for a terminal `status`)."""
    executions = Execution.objects.filter(team=team)
    if action == CANCEL:
        if where.status is not None and where.status not in CANCELLABLE:
            raise NotCancellableStatus(where.status)
        executions = executions.filter(status__in=CANCELLABLE)
    if where.workflow is not None:
        executions = executions.filter(workflow=where.workflow)
    if where.status is not None:
        executions = executions.filter(status=where.status)
    if where.concurrency_key is not None:
        executions = executions.filter(concurrency_key=where.concurrency_key)
    if where.created_after is not None:
        executions = executions.filter(created_at__gte=where.created_after)
    if where.created_before is not None:
        executions = executions.filter(created_at__lt=where.created_before)
    return executions.order_by("created_at", "id")


def bulk_count(*, team: Team, action: str, where: BulkFilter, limit: int) -> int:
    """A dry run: how many executions the action would handle now (at most `limit`)."""
    return bulk_matching(team=team, action=action, where=where)[:limit].count()


def bulk_create(
    *,
    team: Team,
    action: str,
    where: BulkFilter,
    limit: int,
    version: str = SAME,
    start: str = START,
) -> BulkAction:
    """A bulk action on the matched executions (at most `limit`), fixed now; handled by the
    engine clock."""
    ids = list(
        bulk_matching(team=team, action=action, where=where).values_list("id", flat=True)[:limit]
    )
    return BulkAction.objects.create(
        team=team,
        action=action,
        filter={**where.as_json(), "limit": limit},
        options={"version": version, "from": start} if action == REPLAY else {},
        execution_ids=ids,
        status=BulkStatus.RUNNING if ids else BulkStatus.COMPLETED,
        finished_at=None if ids else timezone.now(),
    )


def bulk_advance(*, budget: float) -> int:
    """Batches of the running bulk actions, oldest first, until none is left or `budget`
    seconds have passed (the engine clock's tick); how many executions were handled."""
    deadline = time.monotonic() + budget
    handled = 0
    running = BulkAction.objects.filter(status=BulkStatus.RUNNING).order_by("created_at")
    for bulk_id in list(running.values_list("id", flat=True)[:10]):
        while time.monotonic() < deadline:
            batch = _batch(bulk_id)
            if batch is None:
                break
            handled += batch
    return handled


def _batch(bulk_id: uuid.UUID) -> int | None:
    """The next batch of one action, and its progress, in one transaction: how many it handled;
    None when the action is finished or another clock holds it."""
    with transaction.atomic():
        bulk = (
            BulkAction.objects.select_for_update(skip_locked=True)
            .filter(id=bulk_id, status=BulkStatus.RUNNING)
            .first()
        )
        if bulk is None:
            return None
        in_one = bulk.action == REPLAY and bulk.options.get("from") != FAILED_STEP
        ids = bulk.execution_ids[bulk.done : bulk.done + (REPLAY_BATCH if in_one else BATCH)]
        executions = Execution.objects.select_related(
            "team", "workflow__current_version", "version"
        )
        found = executions.in_bulk(ids)
        if in_one:
            errors = _replay_from_start(bulk, [found.get(execution_id) for execution_id in ids])
        else:
            errors = [
                "pruned" if execution is None else _handle(bulk, execution)
                for execution in (found.get(execution_id) for execution_id in ids)
            ]
        for execution_id, error in zip(ids, errors, strict=True):
            if error is not None:
                bulk.failed += 1
                if len(bulk.errors) < ERRORS_KEPT:
                    bulk.errors.append(f"{execution_id}: {error}")
        bulk.done += len(ids)
        if bulk.done >= bulk.matched:
            bulk.status, bulk.finished_at = BulkStatus.COMPLETED, timezone.now()
        bulk.save(update_fields=["done", "failed", "errors", "status", "finished_at"])
    return len(ids)


def _replay_from_start(bulk: BulkAction, originals: list[Execution | None]) -> list[str | None]:
    """Replays of the originals (None: pruned since) admitted in one statement, each inserted
    linked to its original; for each, why it was not replayed, else None."""
    latest = bulk.options.get("version") == LATEST
    present = [original for original in originals if original is not None]
    runs = [
        Run(
            id=uuid.uuid4(),
            workflow=original.workflow,
            version=original.workflow.applied_version if latest else original.version,
            inputs=original.inputs,
            trigger=original.trigger,
            priority=original.priority,
            replay_of=original.id,
        )
        for original in present
    ]
    decided = dict(zip((run.replay_of for run in runs), admit_batch(bulk.team, runs), strict=True))
    errors: list[str | None] = []
    for original in originals:
        if original is None:
            errors.append("pruned")
            continue
        outcome = decided[original.id]
        errors.append(str(outcome) if isinstance(outcome, Exception) else None)
    return errors


def _handle(bulk: BulkAction, execution: Execution) -> str | None:
    """Cancel or replay one execution in a savepoint; the reason it was not, else None."""
    try:
        with transaction.atomic():
            if bulk.action == CANCEL:
                reason = f"cancelled by bulk action {bulk.id}"
                if not execution_finish(execution.id, status=Status.CANCELLED, error=reason):
                    return "already finished"
                return None
            execution_replay(
                original=execution,
                version=LATEST if bulk.options.get("version") == LATEST else SAME,
                start=FAILED_STEP if bulk.options.get("from") == FAILED_STEP else START,
            )
    except (ConcurrencyLimitExceeded, InvalidInputs, NotResumable, VersionChanged) as exc:
        return str(exc)
    except DatabaseError as exc:  # a deadlock or a lock timeout: this execution only
        return f"database: {exc}"
    return None
