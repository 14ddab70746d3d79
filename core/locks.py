"""The only advisory-lock SQL in Mantle, and the one home of session-scoped PostgreSQL use
(`session_lock` and `listen`, each on a connection of its own to `database.direct_url`: what a
transaction pooler cannot carry).

Every lock but `session_lock` (the engine clock's) is
transaction-scoped (`pg_advisory_xact_lock`), taken inside `transaction.atomic()`, and keyed with
the two-int form `(namespace, primary key)` so keys never collide across kinds.
Lock order is team → named limits (by name) → workflow (workflows in id order) → key, always;
anything else can deadlock. A limit-aware step claim takes its step-scope limits' locks (by
name, then id) and nothing before or after them (docs/limits.md, Step scope).

The one exception to "inside transaction.atomic()": the lock statements of the PL/pgSQL
functions `mantle_admit` and `mantle_promote` (executions/sql/, written out there in the order
above), and the step-scope limits' and rates' locks, written in `mantle_claim_limited`
(executions/sql/mantle_claim_limited.sql), called with the namespaces below. Called outside a
transaction, the function's statement is its transaction: the locks are released by its commit,
with no Python in between.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError, connection, connections
from psycopg import errors as pg_errors


class Namespace(IntEnum):
    TEAM = 1
    WORKFLOW = 2
    POLLER = 3
    # 4 was CRON (cron ticks are deduplicated by idempotency key instead); never reuse it.
    WEBHOOK_PATHS = 5
    ENGINE_TICKER = 6
    KEY = 7
    NAMED_LIMIT = 8
    SCHEDULES = 9
    NAMED_RATE = 10
    # Keyed by team: one workflow upload of a team validated at a time (api/workflows.py),
    # tried, never waited for, before any other lock.
    WORKFLOW_UPLOAD = 11


def _require_transaction() -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("advisory locks must be taken inside transaction.atomic()")


def _lock(namespace: Namespace, key: int) -> None:
    _require_transaction()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s::int, %s::int)", [namespace, key])


# Every admission and promotion takes its team's lock first. A transaction that waits longer
# than this for any lock (this one, a workflow's, a row's) gives up with LockNotAvailable, which
# the API answers 503 `busy`: a flooded team (or a stuck lock holder) costs its own requests a
# bounded wait instead of piling them up until gunicorn kills its workers, and the web workers
# stay free for other teams. Far above a healthy wait (a few ms per queued admission).
LOCK_TIMEOUT_MS = 2000

_LOCK_TEAM_SQL = """
SELECT pg_advisory_xact_lock(%s::int, %s::int)
  FROM (SELECT set_config('lock_timeout', %s, true)) AS bounded
"""

# mantle_admit's locks as it writes them (bench/pgbench.py runs these), in lock order:
# lock_team's (with lock_timeout, set by the volatile subquery before the lock is requested),
# then each named limit of the workflow in name order (lock_named_limits'), then
# lock_workflows([workflow_id])'s and the key's in one statement (a target list is evaluated
# left to right). An unkeyed admission passes key_lock NULL: pg_advisory_xact_lock is strict,
# so no key is locked.
ADMISSION_TEAM_LOCK = """
SELECT pg_advisory_xact_lock(%(team_namespace)s, %(team_id)s::int)
  FROM (SELECT set_config('lock_timeout', %(lock_timeout)s, true)) AS bounded
"""
ADMISSION_LIMIT_LOCK = """
SELECT pg_advisory_xact_lock(%(limit_namespace)s, %(limit_id)s::int)
"""
ADMISSION_FLOW_LOCKS = """
SELECT pg_advisory_xact_lock(%(workflow_namespace)s, %(workflow_id)s::int),
       pg_advisory_xact_lock(%(key_namespace)s, %(key_lock)s)
"""


def key_lock_id(workflow_id: int, key: str) -> int | None:
    """The lock of one key value of a workflow: a stable 32-bit hash of both (CRC-32, the same
    in every process and release), None for the empty key (unkeyed). Two keys may hash alike:
    they then share a lock, which only serialises their admissions; every count is of rows by
    their real key value, so a collision never breaks a limit."""
    if not key:
        return None
    digest = zlib.crc32(f"{workflow_id}:{key}".encode())
    return digest - (1 << 32) if digest >= 1 << 31 else digest


def is_busy(error: BaseException) -> bool:
    """A lock wait that gave up (lock_timeout) or a statement cancelled by a timeout."""
    return isinstance(error, OperationalError) and isinstance(
        error.__cause__, pg_errors.LockNotAvailable | pg_errors.QueryCanceled
    )


def lock_team(team_id: int) -> None:
    """The team's lock, with `lock_timeout` set for the rest of the transaction (SET LOCAL, in
    the same round trip: the volatile subquery runs before the lock is requested)."""
    _require_transaction()
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_TEAM_SQL, [Namespace.TEAM, team_id, f"{LOCK_TIMEOUT_MS}ms"])


def bound_lock_waits() -> None:
    """`lock_timeout` for the rest of this transaction, for a row lock that may be held long
    (e.g. an execution's, while the orchestrator works on it)."""
    _require_transaction()
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{LOCK_TIMEOUT_MS}ms"])


def lock_named_limits(limit_ids_by_name: Iterable[int]) -> None:
    """Lock named limits (after their team's lock, before any workflow's), given in the order
    of their names: the order admission takes them in."""
    for limit_id in limit_ids_by_name:
        _lock(Namespace.NAMED_LIMIT, limit_id)


def lock_workflows(workflow_ids: Iterable[int]) -> None:
    """Lock workflows in id order (after their team's lock), so two lockers never deadlock."""
    for workflow_id in sorted(set(workflow_ids)):
        _lock(Namespace.WORKFLOW, workflow_id)


def lock_webhook_paths() -> None:
    """One lock for every team's webhook paths (unique across teams), taken after the team and
    workflow locks by applies whose workflow has webhook triggers; admission never takes it."""
    _lock(Namespace.WEBHOOK_PATHS, 0)


def lock_schedules() -> None:
    """One lock for django-q2's schedules, which every `mantle serve` upserts as it starts."""
    _lock(Namespace.SCHEDULES, 0)


def try_lock(namespace: Namespace, key: int = 0) -> bool:
    """Non-blocking: True when this transaction now holds the lock (e.g. one poller at a time)."""
    _require_transaction()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s::int, %s::int)", [namespace, key])
        return bool(cursor.fetchone()[0])


class SessionLock:
    """What `session_lock` yields: true while this process holds the lock."""

    def __init__(self, raw: psycopg.Connection[Any], held: bool) -> None:
        self.raw, self.held = raw, held

    def __bool__(self) -> bool:
        return self.held

    def lost(self) -> bool:
        """Whether the lock's connection is gone: its server closed it (killed, demoted by a
        failover) or the kernel gave up on the link (keepalives). The lock may then be another
        process's, on the new primary, while this one's other connections reach that primary
        too (docs/operations.md, Database failover). No round trip: reads what already came."""
        try:
            self.raw.pgconn.consume_input()
        except psycopg.OperationalError:
            return True
        return self.raw.pgconn.status != psycopg.pq.ConnStatus.OK


@contextmanager
def session_lock(namespace: Namespace, key: int = 0) -> Iterator[SessionLock]:
    """Non-blocking, held for the `with` block on a connection of its own (so the holder's
    transactions are unaffected), and released by PostgreSQL when that connection or the whole
    process dies: a lease with no expiry to tune. Yields whether this process holds it (and
    whether it lost it since)."""
    holder = connections.create_connection(settings.DIRECT_DATABASE_ALIAS)
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s::int, %s::int)", [namespace, key])
            yield SessionLock(holder.connection, bool(cursor.fetchone()[0]))
    finally:
        holder.close()


def listen(channel: str) -> psycopg.Connection[Any]:
    """A connection of its own (autocommit, outside Django's connection handling) that LISTENs
    on `channel`: its caller reads the notifications (`.pgconn`) and closes it."""
    listener = connections.create_connection(settings.DIRECT_DATABASE_ALIAS)
    listener.ensure_connection()
    raw: psycopg.Connection[Any] = listener.connection
    try:
        raw.autocommit = True
        raw.execute(f"LISTEN {channel}")
    except BaseException:
        raw.close()
        raise
    return raw
