"""Admission: the one place that decides pending, queued or rejected (docs/limits.md).

A request, a CLI call, a cron tick and a webhook all come here. The decision is the PL/pgSQL
function `mantle_admit` (executions/sql/mantle_admit.sql), one statement: lock the team, then the
workflow; count the slot holders; insert `pending` (the step workers claim it), insert
`queued`, or reject without writing anything. Called outside a transaction, that statement is
the transaction: the locks are held for the function and its commit, and no Python runs under
them. Inside a caller's transaction, the locks are held until that transaction ends.
"""

from __future__ import annotations

import json
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from core import locks
from core.caches import BoundedCache
from executions import metrics
from executions.models import BlockedBy, Execution, Rejection, Status
from executions.services.lifecycle import execution_finish
from executions.sql import REJECTED, prepared_cursor, queries
from executions.sql.rows import rows_as
from teams.models import Team, effective_team_limit
from workflows.admission_values import concurrency_key_value, key_limit_value, priority_value
from workflows.models import OnLimit, WorkflowDefinition, WorkflowVersion
from workflows.schema import WorkflowSpec, undeclared_given, validate_inputs

# The scope of a rejection by `max_queued` (429 `queue_full`).
QUEUE_FULL = "queue_full"
# The scope of a rejection by `rate_limit` (429 `rate_limited`, with Retry-After).
RATE = "rate"
# The scope of a rejection by a pause with `on_pause: reject` (429 `paused`).
PAUSED = "paused"


class ResolutionStale(Exception):
    """What a web process resolved from its cache no longer holds (admission.sql,
    admit_resolved): a revoked key, a new version, a moved hook, or an Idempotency-Key already
    used. Nothing was admitted; resolve from the tables and admit again."""


@dataclass(frozen=True)
class Resolved:
    """A request's team, workflow and version as a web process's cache resolved them, with what
    the admission's own statement checks still holds: the API key's hash (run) or the hook's
    path (webhooks)."""

    key_hash: str | None = None
    hook_path: str | None = None


@dataclass(frozen=True)
class Decision:
    """mantle_admit's row (mantle_admit.sql, RETURNS TABLE): its outcome (a status it inserted, or
    rejected), the limit that queued or rejected it, and the execution it superseded."""

    outcome: str
    scope: str | None
    scope_limit: int | None
    scope_name: str | None
    retry_after: int | None
    admitted_at: datetime
    queue_position: int | None
    superseded: uuid.UUID | None


class ConcurrencyLimitExceeded(Exception):
    """The workflow rejects when full (`on_limit: reject`) and a limit is reached, its queue
    is full (`max_queued`, scope QUEUE_FULL), or it is paused with `on_pause: reject` (scope
    PAUSED, limit None; `name` the paused named limit's, if one is)."""

    def __init__(
        self,
        *,
        scope: str,
        limit: int | None,
        name: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        self.scope = scope
        self.limit = limit
        self.name = name  # the named limit's, when the scope is "limit"
        self.retry_after = retry_after  # seconds until the window admits one, scope RATE
        if scope == PAUSED:
            paused = "its workflow or team" if name is None else f"the named limit {name!r}"
            super().__init__(f"paused: {paused} is paused (on_pause: reject)")
        elif scope == QUEUE_FULL:
            super().__init__(f"the queue is full ({limit} queued, max_queued)")
        elif scope == RATE:
            super().__init__(f"rate limit of {limit} reached; retry in {retry_after} s")
        elif name is not None:
            super().__init__(f"{scope} {name!r} concurrency limit of {limit} reached")
        else:
            super().__init__(f"{scope} concurrency limit of {limit} reached")


@dataclass(frozen=True)
class Admission:
    """What an admission decided: the execution, and its place in its workflow's queue when it
    was queued. `replayed`: a retry under an Idempotency-Key, answered with the original."""

    execution: Execution
    queue_position: int | None
    replayed: bool = False
    # The inputs given that the workflow does not declare, kept (docs/workflows.md, Upstream
    # compatibility).
    warnings: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        return self.execution.status

    @property
    def blocked_by(self) -> str | None:
        return self.execution.blocked_by

    @property
    def blocked_by_name(self) -> str | None:
        return blocked_by_name(self.execution)


def blocked_by_name(execution: Execution) -> str | None:
    """What blocks a queued execution, by name: its key's value when its key is full, the named
    limit's name when that limit is."""
    if execution.blocked_by == BlockedBy.KEY:
        return execution.concurrency_key
    if execution.blocked_by in (BlockedBy.LIMIT, BlockedBy.PAUSED):
        return execution.blocked_by_limit  # a paused named limit's; None for any other pause
    return None


# The strategies that end an execution to make room for a newcomer (docs/limits.md).
SUPERSEDING = (OnLimit.CANCEL_RUNNING, OnLimit.KEEP_LATEST)

_SPECS: BoundedCache[tuple[int, str], WorkflowSpec] = BoundedCache()


def _spec(version: WorkflowVersion) -> WorkflowSpec:
    """A version never changes, so its parsed spec is kept, keyed by id and content hash."""
    key = (version.id, version.content_hash)
    return _SPECS.get_or_make(key, lambda: WorkflowSpec.from_dict(version.spec))


@dataclass(frozen=True)
class Values:
    """What a run is admitted with, evaluated once from its inputs and trigger by its version:
    its inputs with defaults, its concurrency key, its priority and its own key limit."""

    inputs: dict[str, Any]
    key: str
    priority: int
    key_limit: int | None


def admission_values(
    version: WorkflowVersion,
    inputs: dict[str, Any] | None,
    trigger: dict[str, Any],
    priority: int | None,
) -> Values:
    """Raises workflows.schema.InvalidInputs when the version refuses the inputs."""
    spec = _spec(version)
    valid = validate_inputs(spec, inputs)
    return Values(
        inputs=valid,
        key=concurrency_key_value(spec, inputs=valid, trigger=trigger),
        priority=priority_value(spec, inputs=valid, trigger=trigger, given=priority),
        key_limit=key_limit_value(spec, inputs=valid, trigger=trigger),
    )


def key_is_fixed(version: WorkflowVersion) -> bool:
    """Whether every execution of the version has the key "" and no key limit of its own: no
    concurrency_key, and max_parallel_per_key a plain count or none."""
    spec = _spec(version)
    return spec.concurrency_key is None and isinstance(spec.max_parallel_per_key, int)


# The row as mantle_admit inserted it is loaded as a query would load it, without a query;
# named_limits (resolved by mantle_admit) and the reaper's counts of lost workers deferred.
_DEFERRED = frozenset({"named_limits", "lost_leases", "lost_lease_owner"})
_INSERTED_FIELDS = [
    f.attname for f in Execution._meta.concrete_fields if f.attname not in _DEFERRED
]


def execution_admit(
    *,
    team: Team,
    workflow: WorkflowDefinition,
    inputs: dict[str, Any] | None = None,
    trigger: dict[str, Any] | None = None,
    force: bool = False,
    idempotency_key: str | None = None,
    priority: int | None = None,
    resolved: Resolved | None = None,
    execution_id: uuid.UUID | None = None,
    version: WorkflowVersion | None = None,
) -> Admission:
    """Admit one execution of the workflow's current version, or of `version` (a replay's; the
    limits are always the current version's); `priority` (0-9) overrides the workflow's.
    `resolved`: team, workflow and version came from a cache, checked in the same statement.
    `execution_id`: a delayed run's, admitted when due (services/scheduled.py).

    Raises workflows.schema.InvalidInputs before touching the database, ResolutionStale (nothing
    written) when `resolved` no longer holds, and ConcurrencyLimitExceeded (nothing written)
    when the workflow rejects and is full.
    `force` admits as pending whatever the limits; the execution then holds a slot like any other.
    """
    version = version or workflow.applied_version
    given = inputs
    trigger = trigger or {}
    values = admission_values(version, given, trigger, priority)
    warnings = tuple(undeclared_given(_spec(version), given)) if isinstance(given, dict) else ()
    try:
        admission = _admit_locked(
            team=team,
            workflow=workflow,
            version=version,
            inputs=values.inputs,
            trigger=trigger,
            key=values.key,
            priority=values.priority,
            key_limit=values.key_limit,
            force=force,
            idempotency_key=idempotency_key,
            resolved=resolved,
            execution_id=execution_id or uuid.uuid4(),
        )
    except ConcurrencyLimitExceeded as rejected:
        # After the locked transaction rolled back (it would take this row with it), in a
        # transaction of its own: the record the dashboard counts rejections from.
        Rejection.objects.create(team=team, workflow=workflow, scope=rejected.scope)
        raise
    return replace(admission, warnings=warnings) if warnings else admission


_WAKE_WORKERS = queries["wake_workers"].encode()


def _wake_workers() -> None:
    # One simple query on the connection's libpq handle (it releases the GIL while it waits):
    # through Django's and psycopg's cursors this statement cost a quarter of an admission's
    # Python CPU. It returns nothing to read, and a failure is logged by on_commit(robust=True).
    connection = connections[DEFAULT_DB_ALIAS]
    connection.ensure_connection()
    result = connection.connection.pgconn.exec_(_WAKE_WORKERS)
    if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
        raise DatabaseError(result.get_error_message())


def _admit_locked(
    *,
    team: Team,
    workflow: WorkflowDefinition,
    version: WorkflowVersion,
    inputs: dict[str, Any],
    trigger: dict[str, Any],
    key: str,
    priority: int,
    key_limit: int | None,
    force: bool,
    idempotency_key: str | None,
    resolved: Resolved | None,
    execution_id: uuid.UUID,
) -> Admission:
    fields: dict[str, Any] = {
        "inputs": inputs,
        "trigger": trigger,
        "forced": force,
        "idempotency_key": idempotency_key,
        "concurrency_key": key,
        "priority": priority,
        "key_limit": key_limit,
    }
    # Inside a caller's transaction, in a savepoint: a duplicate idempotency key (IntegrityError)
    # fails this admission only, and the caller's transaction stays usable. A strategy that
    # supersedes an execution ends it in the same transaction, under the admission's locks.
    superseding = version.on_limit in SUPERSEDING or version.debounce is not None
    connection = connections[DEFAULT_DB_ALIAS]
    atomic = connection.in_atomic_block or superseding
    with transaction.atomic() if atomic else nullcontext(), prepared_cursor(connection) as cursor:
        cursor.execute(
            queries["admit"] if resolved is None else queries["admit_resolved"],
            {
                **fields,
                "id": execution_id,
                "team_id": team.id,
                "workflow_id": workflow.id,
                "version_id": version.id,
                "inputs": json.dumps(inputs),
                "trigger": json.dumps(fields["trigger"]),
                "evaluated_key_limit": key_limit,
                "default_team_limit": effective_team_limit(None),
                "team_namespace": locks.Namespace.TEAM,
                "limit_namespace": locks.Namespace.NAMED_LIMIT,
                "workflow_namespace": locks.Namespace.WORKFLOW,
                "key_namespace": locks.Namespace.KEY,
                "key_lock": locks.key_lock_id(workflow.id, key),
                "lock_timeout": f"{locks.LOCK_TIMEOUT_MS}ms",
                "key_hash": resolved.key_hash if resolved else None,
                "hook_path": resolved.hook_path if resolved else None,
            },
        )
        decisions = rows_as(cursor, Decision)
        if not decisions:
            raise ResolutionStale
        (decision,) = decisions
        if decision.superseded is not None:
            execution_finish(
                decision.superseded, status=Status.CANCELLED, error=f"superseded by {execution_id}"
            )
    outcome, scope, created_at = decision.outcome, decision.scope, decision.admitted_at
    if outcome == Status.PENDING:
        # Announced once committed (admission.sql, wake_workers); if that fails, the claimer's
        # safety poll finds it, so the admission stands.
        transaction.on_commit(_wake_workers, using=connection.alias, robust=True)
    if outcome == REJECTED:
        assert scope is not None  # mantle_admit names the limit of every rejection
        metrics.count_rejection(team=team.slug, workflow=workflow.name, scope=scope)
        raise ConcurrencyLimitExceeded(
            scope=scope,
            limit=decision.scope_limit,
            name=decision.scope_name,
            retry_after=decision.retry_after,
        )
    row = {
        **fields,
        "id": execution_id,
        "team_id": team.id,
        "workflow_id": workflow.id,
        "version_id": version.id,
        "status": outcome,
        "blocked_by": scope,
        "blocked_by_limit": decision.scope_name,
        "error": "",
        "created_at": created_at,
        "queued_at": created_at if outcome == Status.QUEUED else None,
        "promoted_at": None,
        "pending_at": created_at if outcome == Status.PENDING else None,
        "not_before": created_at + version.debounce
        if scope == BlockedBy.DEBOUNCE and version.debounce is not None
        else None,
        "started_at": None,
        "completed_at": None,
        "run_at": None,  # a delayed run's is written back after (services/scheduled.py)
        "replay_of_id": None,  # a replay's are written after (services/replay.py)
        "reused_steps": 0,
    }
    execution = Execution.from_db(
        connection.alias, _INSERTED_FIELDS, [row[name] for name in _INSERTED_FIELDS]
    )
    execution.team, execution.workflow, execution.version = team, workflow, version
    if outcome == Status.QUEUED:
        return Admission(execution=execution, queue_position=decision.queue_position)
    return Admission(execution=execution, queue_position=None)
