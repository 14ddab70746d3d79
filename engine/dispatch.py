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
status of each step's execution. The statements are in executions/sql/engine.sql, run by
executions.services.claims (the data room); the engine calls those that need its settings
(the lease, the rate poll) through this module, the others directly.
"""

from __future__ import annotations

import uuid

from django.conf import settings

from executions.services import claims
from executions.services.claims import Claim

# Seconds between the claimer's claims while a step waits for a rate's window to admit it.
RATE_POLL = 0.5


def _lease() -> float:
    return settings.MANTLE.engine.step_lease


def executions_claim(limit: int) -> list[uuid.UUID]:
    """pending → running for up to `limit` executions, oldest first; the caller advances them."""
    return claims.executions_claim(limit=limit)


def steps_claim(owner: str, limit: int) -> list[Claim]:
    """pending → running for up to `limit` due steps of running executions."""
    return claims.steps_claim(owner=owner, limit=limit, lease=_lease())


def steps_claim_limited(owner: str, limit: int) -> list[Claim]:
    """waiting → running for up to `limit` due steps whose step-scope limits have room, under
    those limits' locks (mantle_claim_limited; docs/limits.md, Step scope)."""
    return claims.steps_claim_limited(owner=owner, limit=limit, lease=_lease())


def steps_claim_started(owner: str, execution_ids: list[uuid.UUID], limit: int) -> list[Claim]:
    """Up to `limit` of the first steps of executions started in this transaction, for `owner`."""
    return claims.steps_claim_started(
        owner=owner, execution_ids=execution_ids, limit=limit, lease=_lease()
    )


def steps_next_due() -> float | None:
    return claims.steps_next_due(rate_poll=RATE_POLL)


def leases_renew(owner: str, held: dict[int, int]) -> dict[int, str]:
    """Renew the leases of `held` ({step id: attempt}); {step id: its execution's status} for
    those still held."""
    return claims.leases_renew(owner=owner, held=held, lease=_lease())


def leases_release(owner: str, held: dict[int, int]) -> int:
    return claims.leases_release(owner=owner, held=held)
