"""The step workers' statements (executions/sql/engine.sql), run for engine/dispatch.py,
engine/orchestrator.py and engine/reaper.py as procrastinate's worker calls its manager: the
claims of executions and steps, the leases, the settlements, the advance's locked rows and the
step rows it creates. Each returns typed rows (executions.sql.rows.rows_as: filled by column
name); the engine passes its own settings (lease length, poll interval) as arguments."""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from core import locks
from executions.models import Execution, StepExecution
from executions.sql import queries
from executions.sql.rows import rows_as
from teams.models import Team
from workflows.models import WorkflowDefinition


@dataclass(frozen=True)
class Claim:
    """One claimed attempt: the columns every claim statement returns."""

    id: int
    attempt: int
    name: str
    fanout_index: int | None
    execution_id: uuid.UUID
    version_id: int
    started_at: datetime | None  # the execution's: its workflow timeout counts from it


@dataclass(frozen=True)
class Expired:
    """A running attempt whose lease expired, the owner that lost it, and when its lease ran
    out (the database's clock)."""

    claim: Claim
    owner: str
    expired_at: datetime


def _expired(lease_owner: str, lease_expires_at: datetime, **claim: Any) -> Expired:
    """A steps_expired row: a claim's columns, the owner that lost it and when."""
    return Expired(Claim(**claim), lease_owner, lease_expires_at)


@dataclass(frozen=True)
class _Claimed:
    id: uuid.UUID


@dataclass(frozen=True)
class _Settled:
    id: int
    execution_id: uuid.UUID


@dataclass(frozen=True)
class _Renewed:
    id: int
    status: str  # its execution's


@dataclass(frozen=True)
class Settle:
    """How one attempt ends: its status, output (JSON) and error, or a retry after `delay`
    seconds (None: no retry)."""

    id: int
    attempt: int
    owner: str
    status: str
    output: str | None
    error: str
    delay: float | None


def executions_claim(*, limit: int) -> list[uuid.UUID]:
    """pending → running for up to `limit` executions, the teams in turn."""
    with connection.cursor() as cursor:
        cursor.execute(queries["executions_claim"], {"limit": limit})
        return [claimed.id for claimed in rows_as(cursor, _Claimed)]


def steps_claim(*, owner: str, limit: int, lease: float) -> list[Claim]:
    """pending → running, leased to `owner` for `lease` seconds, for up to `limit` due steps."""
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_claim"], {"owner": owner, "limit": limit, "lease": lease})
        return rows_as(cursor, Claim)


def steps_claim_limited(*, owner: str, limit: int, lease: float) -> list[Claim]:
    """waiting → running for up to `limit` due steps whose step-scope limits have room, under
    those limits' locks (mantle_claim_limited; docs/limits.md, Step scope)."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["steps_claim_limited"],
            {
                "owner": owner,
                "limit": limit,
                "lease": lease,
                "limit_namespace": locks.Namespace.NAMED_LIMIT,
                "rate_namespace": locks.Namespace.NAMED_RATE,
            },
        )
        return rows_as(cursor, Claim)


def steps_claim_started(
    *, owner: str, execution_ids: list[uuid.UUID], limit: int, lease: float
) -> list[Claim]:
    """Up to `limit` of the first steps of executions started in this transaction, for `owner`."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["steps_claim_started"],
            {"owner": owner, "ids": execution_ids, "limit": limit, "lease": lease},
        )
        return rows_as(cursor, Claim)


def steps_expired() -> list[Expired]:
    """Running attempts whose lease expired, with the owner that lost them."""
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_expired"])
        return rows_as(cursor, _expired)


def attempts_settle(settles: list[Settle], *, flushed: bool = True) -> dict[int, uuid.UUID]:
    """End the attempts still held by their owners: {step id: execution id}. Not `flushed`: the
    commit does not wait for the disk (steps_settle says when that is allowed)."""
    columns: dict[str, Any] = {
        "flushed": flushed,
        "ids": [s.id for s in settles],
        "attempts": [s.attempt for s in settles],
        "owners": [s.owner for s in settles],
        "statuses": [s.status for s in settles],
        "outputs": [s.output for s in settles],
        "errors": [s.error for s in settles],
        "delays": [s.delay for s in settles],
    }
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_settle"], columns)
        return {row.id: row.execution_id for row in rows_as(cursor, _Settled)}


def steps_next_due(*, rate_poll: float) -> float | None:
    """Seconds until the earliest step waiting for its `not_before`; at most `rate_poll` while a
    step waits for a rate's window; None when none waits."""
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_next_due"], {"rate_poll": rate_poll})
        seconds = cursor.fetchone()[0]
    return None if seconds is None else float(seconds)


def leases_renew(*, owner: str, held: dict[int, int], lease: float) -> dict[int, str]:
    """Renew the leases of `held` ({step id: attempt}); {step id: its execution's status} for
    those still held."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["leases_renew"],
            {"owner": owner, "ids": list(held), "attempts": list(held.values()), "lease": lease},
        )
        return {row.id: row.status for row in rows_as(cursor, _Renewed)}


def leases_release(*, owner: str, held: dict[int, int]) -> int:
    """Hand back the attempts of `held` as if never claimed; how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["leases_release"],
            {"owner": owner, "ids": list(held), "attempts": list(held.values())},
        )
        return cursor.rowcount


def execution_lease_lost(*, execution_id: uuid.UUID, owner: str) -> int:
    """Count the worker `owner` once as lost by the execution; how many workers it has lost."""
    with connection.cursor() as cursor:
        cursor.execute(queries["execution_lease_lost"], {"id": execution_id, "owner": owner})
        row = cursor.fetchone()
    return row[0] if row else 0


def steps_insert(rows: list[StepExecution]) -> None:
    """Insert the step rows an advance created, in one statement (steps_insert): through
    bulk_create, preparing each value of each column cost a quarter of the claimer's CPU in a
    no-op execution (docs/performance.md, CPU per execution)."""
    if not rows:
        return
    listed = [
        {
            "execution_id": str(row.execution_id),
            "name": row.name,
            "fanout_index": row.fanout_index,
            "status": row.status,
            "error": row.error,
            # Unset, an ArrayField with a db_default holds a DatabaseDefault: the empty list.
            "limit_ids": row.limit_ids if isinstance(row.limit_ids, list) else [],
            "limit_units": row.limit_units if isinstance(row.limit_units, list) else [],
            "rate_id": row.rate_id,
            "rate_units": row.rate_units,
            "rate_key": row.rate_key,
            "completed": row.completed_at is not None,  # Now(): the statement's time
        }
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_insert"], {"rows": json.dumps(listed)})


# The columns of an Execution that an advance reads (the others load if read: an expression's
# `inputs` and `trigger`), in the model's order, as Model.from_db takes them.
_LOCKED = tuple(
    field.attname
    for field in Execution._meta.concrete_fields
    if field.attname
    in {"id", "team_id", "workflow_id", "version_id", "status", "started_at", "reused_steps"}
)


def executions_lock(execution_ids: Collection[uuid.UUID]) -> list[Execution]:
    """The executions, locked in id order, each with its workflow's name and its team's slug.
    (A statement of its own: compiling the equivalent queryset cost more CPU than the rest of
    a no-op execution's advance.)"""
    with connection.cursor() as cursor:
        cursor.execute(queries["executions_lock"], {"ids": list(execution_ids)})
        names = [column.name for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    executions = []
    for row in rows:
        execution = Execution.from_db(connection.alias, _LOCKED, [row[name] for name in _LOCKED])
        execution.workflow = WorkflowDefinition.from_db(
            connection.alias, ["id", "name"], [row["workflow_id"], row["workflow_name"]]
        )
        execution.team = Team.from_db(
            connection.alias, ["id", "slug"], [row["team_id"], row["team_slug"]]
        )
        executions.append(execution)
    return executions


def step_rows(execution_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[StepExecution]]:
    """The steps' own rows of the executions (read once for a batch), without a fan-out's
    items; each with `item_count`, its number of items."""
    rows: dict[uuid.UUID, list[StepExecution]] = {}
    if execution_ids:
        # A raw statement, as for the lock: compiling the queryset cost more than running it.
        steps = StepExecution.objects.raw(queries["step_rows"], {"ids": execution_ids})
        for row in steps:
            rows.setdefault(row.execution_id, []).append(row)
    return rows
