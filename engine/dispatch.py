"""How work reaches the step workers: each claims it from its table; nothing is handed over.

A row that becomes pending (an execution promoted, a step created or retried) NOTIFYs
`executions.sql.WORK_CHANNEL` at its commit (executions/sql/triggers.sql); an execution admitted
pending is announced right after its admission commits, in a transaction of its own (a NOTIFY in
a commit serializes every such commit of the database). Every step worker
LISTENs and claims with `FOR UPDATE SKIP LOCKED`, never more steps than it has free slots
(back-pressure: what one worker cannot take, another worker or machine takes). Nothing can be
lost between a commit and a hand-off, so nothing is ever re-dispatched; an announcement lost
with its process after the commit leaves the row to the claimer's safety poll.

Claims take the teams in turn (round-robin: each team's first, then each team's second, …), and
within a team go by branch index first (a plain step counts as index 0), then age: the first
branches of every fan-out and every plain step come before the later branches of any fan-out.
So one team's backlog (50,000 branches, or thousands of executions) holds back another team's
start by at most one step per team with work. A claim does not rank the backlog to do it: it
finds the teams with work and reads each team's next rows by index probes, so its cost does not
grow with the backlog (docs/performance.md, Claims).

A step with step-scope limits is created `waiting`, never `pending`: the plain claim never sees
it; the limit-aware claim (`steps_claim_limited`, which takes those limits' locks) makes it
running when every limit it lists has room, before the plain claim fills the free slots.

A claim returns what running the attempt needs (engine.runner.prepare), so an attempt whose
params read no expression starts without another query.

Leases are per process: one statement renews every lease a worker holds and reads back the
status of each step's execution. The statements are in executions/sql/engine.sql.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection

from core import locks
from executions.models import StepExecution
from executions.sql import queries


@dataclass(frozen=True)
class Claim:
    """One claimed attempt: the columns of the `step_claimed` block."""

    id: int
    attempt: int
    name: str
    fanout_index: int | None
    execution_id: uuid.UUID
    version_id: int
    started_at: datetime | None  # the execution's: its workflow timeout counts from it


def executions_claim(limit: int) -> list[uuid.UUID]:
    """pending → running for up to `limit` executions, oldest first; the caller advances them."""
    with connection.cursor() as cursor:
        cursor.execute(queries["executions_claim"], {"limit": limit})
        return [row[0] for row in cursor.fetchall()]


def steps_claim(owner: str, limit: int) -> list[Claim]:
    """pending → running for up to `limit` due steps of running executions."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["steps_claim"],
            {"owner": owner, "limit": limit, "lease": settings.MANTLE.engine.step_lease},
        )
        return [Claim(*row) for row in cursor.fetchall()]


def steps_claim_limited(owner: str, limit: int) -> list[Claim]:
    """waiting → running for up to `limit` due steps whose step-scope limits have room, under
    those limits' locks (mantle_claim_limited; docs/limits.md, Step scope)."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["steps_claim_limited"],
            {
                "owner": owner,
                "limit": limit,
                "lease": settings.MANTLE.engine.step_lease,
                "limit_namespace": locks.Namespace.NAMED_LIMIT,
                "rate_namespace": locks.Namespace.NAMED_RATE,
            },
        )
        return [Claim(*row) for row in cursor.fetchall()]


def steps_claim_started(owner: str, execution_ids: list[uuid.UUID], limit: int) -> list[Claim]:
    """Up to `limit` of the first steps of executions started in this transaction, for `owner`."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["steps_claim_started"],
            {
                "owner": owner,
                "ids": execution_ids,
                "limit": limit,
                "lease": settings.MANTLE.engine.step_lease,
            },
        )
        return [Claim(*row) for row in cursor.fetchall()]


def steps_expired() -> list[tuple[Claim, str]]:
    """Running attempts whose lease expired, with the owner that lost them."""
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_expired"])
        return [(Claim(*row[:-1]), row[-1]) for row in cursor.fetchall()]


# (step id, attempt, owner, status, output as JSON, error, retry delay in seconds or None)
SettleRow = tuple[int, int, str, str, str | None, str, float | None]


def attempts_settle(rows: list[SettleRow]) -> dict[int, uuid.UUID]:
    """End the attempts of `rows` still held by their owners: {step id: execution id}."""
    names = ("ids", "attempts", "owners", "statuses", "outputs", "errors", "delays")
    columns = {name: [row[i] for row in rows] for i, name in enumerate(names)}
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_settle"], columns)
        return dict(cursor.fetchall())


# Seconds between the claimer's claims while a step waits for a rate's window to admit it.
RATE_POLL = 0.5


def steps_next_due() -> float | None:
    with connection.cursor() as cursor:
        cursor.execute(queries["steps_next_due"], {"rate_poll": RATE_POLL})
        seconds = cursor.fetchone()[0]
    return None if seconds is None else float(seconds)


def leases_renew(owner: str, held: dict[int, int]) -> dict[int, str]:
    """Renew the leases of `held` ({step id: attempt}); {step id: its execution's status} for
    those still held."""
    with connection.cursor() as cursor:
        cursor.execute(
            queries["leases_renew"],
            {
                "owner": owner,
                "ids": list(held),
                "attempts": list(held.values()),
                "lease": settings.MANTLE.engine.step_lease,
            },
        )
        return dict(cursor.fetchall())


def leases_release(owner: str, held: dict[int, int]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            queries["leases_release"],
            {"owner": owner, "ids": list(held), "attempts": list(held.values())},
        )
        return cursor.rowcount


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
