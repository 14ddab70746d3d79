"""Admission in batches (docs/operations.md, Delayed runs and Bulk actions): many executions of
one team admitted in the caller's transaction, one statement (admit_batch.sql) per piece of the
batch, each execution decided by mantle_admit exactly as execution_admit decides one, in the
batch's order; a piece ends after a run that may supersede another, which is ended before the
next is decided. The engine clock admits bulk replays, and delayed runs of a version applied
since they were scheduled, this way: one round trip per piece instead of one transaction,
savepoint and round trip per execution.

The first admission of a batch takes its team's lock, then each its workflow's, named limits'
and key's; all are held until the caller's transaction ends. A batch is of one team, so like
every other admission it takes the team's lock before any other: no deadlock. Its size bounds
how long the team's other admissions and promotions wait.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db import connection

from core import locks
from executions import metrics
from executions.models import Rejection, Status
from executions.services.admission import (
    ConcurrencyLimitExceeded,
    Decision,
    Values,
    admission_values,
)
from executions.services.lifecycle import execution_finish
from executions.sql import REJECTED, queries
from executions.sql.rows import rows_as
from teams.models import Team, effective_team_limit
from workflows.models import OnLimit, WorkflowDefinition, WorkflowVersion
from workflows.schema import InvalidInputs


@dataclass(frozen=True)
class Run:
    """One execution to admit: `version` (of `workflow`) is the one it runs, the limits are the
    workflow's current version's; `priority` None: the workflow's. `run_at` (a delayed run's
    time) and `replay_of` (a replay's original) are stored with it."""

    id: uuid.UUID
    workflow: WorkflowDefinition
    version: WorkflowVersion
    inputs: dict[str, Any]
    trigger: dict[str, Any]
    priority: int | None = None
    idempotency_key: str | None = None
    run_at: datetime | None = None
    replay_of: uuid.UUID | None = None


def admit_batch(team: Team, runs: list[Run]) -> list[str | Exception]:
    """Admit `runs` (all of `team`) in the caller's transaction: for each, its status (pending
    or queued), InvalidInputs (not admitted: its version refuses its inputs) or
    ConcurrencyLimitExceeded (rejected: nothing written, the rejection recorded)."""
    outcomes: list[str | Exception] = []
    admitted: list[tuple[int, Run, Values]] = []
    for run in runs:
        try:
            values = admission_values(run.version, run.inputs, run.trigger, run.priority)
        except InvalidInputs as invalid:
            outcomes.append(invalid)
            continue
        admitted.append((len(outcomes), run, values))
        outcomes.append(Status.QUEUED)  # decided below
    for chunk in cut_after_superseding(admitted, lambda item: item[1].workflow):
        decisions = _admit(team, [(run, values) for _, run, values in chunk])
        for (index, run, _), decision in zip(chunk, decisions, strict=True):
            outcomes[index] = settle(team, run.workflow, run.id, decision)
    return outcomes


def _admit(team: Team, runs: list[tuple[Run, Values]]) -> list[Decision]:
    columns: dict[str, list[Any]] = {
        "ids": [run.id for run, _ in runs],
        "workflow_ids": [run.workflow.id for run, _ in runs],
        "version_ids": [run.version.id for run, _ in runs],
        "inputs": [json.dumps(values.inputs) for _, values in runs],
        "triggers": [json.dumps(run.trigger) for run, _ in runs],
        "idempotency_keys": [run.idempotency_key for run, _ in runs],
        "concurrency_keys": [values.key for _, values in runs],
        "priorities": [values.priority for _, values in runs],
        "key_limits": [values.key_limit for _, values in runs],
        "key_locks": [locks.key_lock_id(run.workflow.id, values.key) for run, values in runs],
        "run_ats": [run.run_at for run, _ in runs],
        "replay_ofs": [run.replay_of for run, _ in runs],
    }
    with connection.cursor() as cursor:
        cursor.execute(queries["admit_batch"], {**columns, **lock_parameters(team)})
        decisions = rows_as(cursor, Decision)
        if any(decision.outcome == Status.PENDING for decision in decisions):
            cursor.execute(queries["admit_batch_wake_workers"])
    return decisions


T = TypeVar("T")


def cut_after_superseding(
    items: list[T], workflow_of: Callable[[T], WorkflowDefinition]
) -> Iterator[list[T]]:
    """`items` in order, in pieces each admitted in one statement: a piece ends after each run
    whose workflow may supersede another execution when it is admitted (on_limit
    cancel_running or keep_latest, a debounce). The caller ends the superseded one before the
    next admission is decided, as one admission at a time does: else the next would count it
    still holding its slot or still queued."""
    piece: list[T] = []
    for item in items:
        piece.append(item)
        version = workflow_of(item).applied_version
        if version.debounce or version.on_limit in (OnLimit.CANCEL_RUNNING, OnLimit.KEEP_LATEST):
            yield piece
            piece = []
    if piece:
        yield piece


def lock_parameters(team: Team) -> dict[str, Any]:
    """mantle_admit's parameters that are the same for every execution of a team's batch: the
    team, the default team limit, the lock namespaces and the lock timeout."""
    return {
        "team_id": team.id,
        "default_team_limit": effective_team_limit(None),
        "team_namespace": locks.Namespace.TEAM,
        "limit_namespace": locks.Namespace.NAMED_LIMIT,
        "workflow_namespace": locks.Namespace.WORKFLOW,
        "key_namespace": locks.Namespace.KEY,
        "lock_timeout": f"{locks.LOCK_TIMEOUT_MS}ms",
    }


def settle(
    team: Team, workflow: WorkflowDefinition, execution_id: uuid.UUID, decision: Decision
) -> str | Exception:
    """What a batch's admission leaves to its caller, in its transaction: the execution it
    superseded ended, a rejection recorded and counted. Its status, or ConcurrencyLimitExceeded
    when rejected."""
    if decision.superseded is not None:
        execution_finish(
            decision.superseded, status=Status.CANCELLED, error=f"superseded by {execution_id}"
        )
    if decision.outcome != REJECTED:
        return decision.outcome
    scope = decision.scope
    assert scope is not None  # mantle_admit names the limit of every rejection
    Rejection.objects.create(team=team, workflow=workflow, scope=scope)
    metrics.count_rejection(team=team.slug, workflow=workflow.name, scope=scope)
    return ConcurrencyLimitExceeded(
        scope=scope,
        limit=decision.scope_limit,
        name=decision.scope_name,
        retry_after=decision.retry_after,
    )
