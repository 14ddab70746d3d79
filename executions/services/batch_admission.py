"""Admission in batches (docs/operations.md, Delayed runs and Bulk actions): many executions of
one team admitted in one statement of the caller's transaction (admit_batch.sql), each decided
by mantle_admit exactly as execution_admit decides one, in the batch's order. The engine clock
admits delayed runs and bulk replays this way: one round trip per batch instead of one
transaction, savepoint and round trip per execution.

The first admission of a batch takes its team's lock, then each its workflow's, named limits'
and key's; all are held until the caller's transaction ends. A batch is of one team, so like
every other admission it takes the team's lock before any other: no deadlock. Its size bounds
how long the team's other admissions and promotions wait.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from core import locks
from executions import metrics
from executions.models import Rejection, Status
from executions.services.admission import (
    ConcurrencyLimitExceeded,
    Decision,
    admission_values,
)
from executions.services.lifecycle import execution_finish
from executions.sql import REJECTED, queries
from executions.sql.rows import rows_as
from teams.models import Team, effective_team_limit
from workflows.models import WorkflowDefinition, WorkflowVersion
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
    params: dict[str, list[Any]] = {
        name: []
        for name in (
            "ids",
            "workflow_ids",
            "version_ids",
            "inputs",
            "triggers",
            "idempotency_keys",
            "concurrency_keys",
            "priorities",
            "key_limits",
            "key_locks",
            "run_ats",
            "replay_ofs",
        )
    }
    admitted: list[tuple[int, Run]] = []
    for run in runs:
        try:
            values = admission_values(run.version, run.inputs, run.trigger, run.priority)
        except InvalidInputs as invalid:
            outcomes.append(invalid)
            continue
        for name, value in (
            ("ids", run.id),
            ("workflow_ids", run.workflow.id),
            ("version_ids", run.version.id),
            ("inputs", json.dumps(values.inputs)),
            ("triggers", json.dumps(run.trigger)),
            ("idempotency_keys", run.idempotency_key),
            ("concurrency_keys", values.key),
            ("priorities", values.priority),
            ("key_limits", values.key_limit),
            ("key_locks", locks.key_lock_id(run.workflow.id, values.key)),
            ("run_ats", run.run_at),
            ("replay_ofs", run.replay_of),
        ):
            params[name].append(value)
        admitted.append((len(outcomes), run))
        outcomes.append(Status.QUEUED)  # decided below
    if not admitted:
        return outcomes
    with connection.cursor() as cursor:
        cursor.execute(
            queries["admit_batch"],
            {
                **params,
                "team_id": team.id,
                "default_team_limit": effective_team_limit(None),
                "team_namespace": locks.Namespace.TEAM,
                "limit_namespace": locks.Namespace.NAMED_LIMIT,
                "workflow_namespace": locks.Namespace.WORKFLOW,
                "key_namespace": locks.Namespace.KEY,
                "lock_timeout": f"{locks.LOCK_TIMEOUT_MS}ms",
            },
        )
        decisions = rows_as(cursor, Decision)
        if any(decision.outcome == Status.PENDING for decision in decisions):
            cursor.execute(queries["admit_batch_wake_workers"])
    for (index, run), decision in zip(admitted, decisions, strict=True):
        if decision.superseded is not None:
            execution_finish(
                decision.superseded, status=Status.CANCELLED, error=f"superseded by {run.id}"
            )
        if decision.outcome == REJECTED:
            scope = decision.scope
            assert scope is not None  # mantle_admit names the limit of every rejection
            Rejection.objects.create(team=team, workflow=run.workflow, scope=scope)
            metrics.count_rejection(team=team.slug, workflow=run.workflow.name, scope=scope)
            outcomes[index] = ConcurrencyLimitExceeded(
                scope=scope,
                limit=decision.scope_limit,
                name=decision.scope_name,
                retry_after=decision.retry_after,
            )
        else:
            outcomes[index] = decision.outcome
    return outcomes
