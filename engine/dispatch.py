"""How work reaches the step workers: each claims it from its table; nothing is handed over.

A row that becomes pending (an execution admitted or promoted, a step created or retried)
NOTIFYs `executions.sql.WORK_CHANNEL` at its commit (the trigger of migration 0005); every step
worker LISTENs and claims with `FOR UPDATE SKIP LOCKED`, never more steps than it has free slots
(back-pressure: what one worker cannot take, another worker or machine takes). Nothing can be
lost between a commit and a hand-off, so nothing is ever re-dispatched.

Claims go by branch index first (a plain step counts as index 0), then age: the first branches
of every fan-out and every plain step come before the later branches of any fan-out, so one
execution's huge fan-out never holds back another execution's start (the orchestrator keeps at
most FANOUT_WINDOW branches of a fan-out pending).

Leases are per process: one statement renews every lease a worker holds and reads back the
status of each step's execution.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import connection

_CLAIM_EXECUTIONS = """
UPDATE executions_execution SET status = 'running', started_at = now()
 WHERE id IN (SELECT id FROM executions_execution WHERE status = 'pending'
               ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING id
"""

_CLAIM_STEPS = """
UPDATE executions_stepexecution s
   SET status = 'running', lease_owner = %(owner)s, started_at = now(),
       lease_expires_at = now() + make_interval(secs => %(lease)s)
 WHERE s.id IN (SELECT p.id FROM executions_stepexecution p
                  JOIN executions_execution e ON e.id = p.execution_id
                 WHERE p.status = 'pending' AND (p.not_before IS NULL OR p.not_before <= now())
                   AND e.status = 'running'
                 ORDER BY coalesce(p.fanout_index, 0), p.id LIMIT %(limit)s
                   FOR UPDATE OF p SKIP LOCKED)
RETURNING s.id, s.attempt
"""

# Seconds until the earliest pending step waiting for its `not_before` (a retry's backoff).
_NEXT_DUE = """
SELECT extract(epoch FROM min(not_before) - now()) FROM executions_stepexecution
 WHERE status = 'pending' AND not_before > now()
"""

# Renew every lease the owner holds, fenced by attempt; the steps it no longer holds are missing
# from the result (the reaper took them over).
_RENEW_LEASES = """
UPDATE executions_stepexecution s
   SET lease_expires_at = now() + make_interval(secs => %(lease)s)
  FROM executions_execution e, unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempt)
 WHERE s.id = held.id AND s.attempt = held.attempt AND s.status = 'running'
   AND s.lease_owner = %(owner)s AND e.id = s.execution_id
RETURNING s.id, e.status
"""

# A stopping worker hands back the attempts it did not finish, as if never claimed.
_RELEASE = """
UPDATE executions_stepexecution s
   SET status = 'pending', lease_owner = '', lease_expires_at = NULL, started_at = NULL
  FROM executions_execution e, unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempt)
 WHERE s.id = held.id AND s.attempt = held.attempt AND s.status = 'running'
   AND s.lease_owner = %(owner)s AND e.id = s.execution_id AND e.status = 'running'
"""


def executions_claim(limit: int) -> list[uuid.UUID]:
    """pending → running for up to `limit` executions, oldest first; the caller advances them."""
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_EXECUTIONS, {"limit": limit})
        return [row[0] for row in cursor.fetchall()]


def steps_claim(owner: str, limit: int) -> list[tuple[int, int]]:
    """pending → running for up to `limit` due steps of running executions: (id, attempt)."""
    with connection.cursor() as cursor:
        cursor.execute(
            _CLAIM_STEPS,
            {"owner": owner, "limit": limit, "lease": settings.MANTLE.engine.step_lease},
        )
        return cursor.fetchall()


def steps_next_due() -> float | None:
    with connection.cursor() as cursor:
        cursor.execute(_NEXT_DUE)
        seconds = cursor.fetchone()[0]
    return None if seconds is None else float(seconds)


def leases_renew(owner: str, held: dict[int, int]) -> dict[int, str]:
    """Renew the leases of `held` ({step id: attempt}); {step id: its execution's status} for
    those still held."""
    with connection.cursor() as cursor:
        cursor.execute(
            _RENEW_LEASES,
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
            _RELEASE, {"owner": owner, "ids": list(held), "attempts": list(held.values())}
        )
        return cursor.rowcount
