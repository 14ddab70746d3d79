"""Every SQL statement of executions, api reads and the dashboard: named blocks in the .sql files
beside this module (procrastinate's queries.sql style), loaded once at import, and the functions
and triggers that live in the database, each written out whole in a file of its own.

A block starts with `-- name: <name>`; the comment lines right after it document it; its
parameters are psycopg's `%(param)s`; it is whole SQL, run as written (docs/architecture.md, The
data room). tests/structure checks that every block is used and every name used exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

# The channel on which every row that becomes pending (an execution or a step) is announced, at
# commit, by the triggers of triggers.sql: the step workers LISTEN on it.
WORK_CHANNEL = "mantle_work"

_HERE = Path(__file__).parent
_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)

# An outcome of mantle_admit besides the statuses it inserts.
REJECTED = "rejected"


def _without_leading_comments(text: str) -> str:
    lines = text.strip().splitlines()
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "\n".join(lines).strip()


def _blocks(paths: Iterable[Path]) -> dict[str, str]:
    blocks: dict[str, str] = {}
    for path in paths:
        _, *parts = _BLOCK.split(path.read_text())
        for name, body in zip(parts[::2], parts[1::2], strict=True):
            if name in blocks:
                raise ValueError(f"{path.name}: the name {name!r} is taken")
            blocks[name] = _without_leading_comments(body)
    return blocks


# What lives in the database, each written out whole in a file of its own: the PL/pgSQL functions
# and the triggers.
_INSTALLED = (
    "mantle_room.sql",
    "mantle_fair_queue.sql",
    "mantle_promote.sql",
    "mantle_admit.sql",
    "mantle_admit_due.sql",
    "mantle_claim_limited.sql",
    "mantle_fair_heads.sql",
    "mantle_queued_turn.sql",
    "mantle_promotion_owed.sql",
    "triggers.sql",
)
_SOURCES = sorted(p for p in _HERE.glob("*.sql") if p.name not in _INSTALLED)
queries: dict[str, str] = _blocks(_SOURCES)


# The functions that take advisory locks: how many lock statements each has (each one
# `PERFORM pg_advisory_xact_lock(...);`), and the first statement that writes after its locked
# reads. The race tests' lockless mutant (tests/concurrency) strips the one and delays the other.
LOCK_STATEMENT = re.compile(r"PERFORM pg_advisory_xact_lock\([^;]*;")
LOCKS_IN_FUNCTION = {
    "mantle_admit": (3, "_created_at := clock_timestamp();"),
    "mantle_promote": (3, "    WITH promoted AS ("),
}

ADMIT_FUNCTION = _without_leading_comments((_HERE / "mantle_admit.sql").read_text())
# ... and the batch of due delayed runs that calls it.
ADMIT_DUE_FUNCTIONS = _without_leading_comments((_HERE / "mantle_admit_due.sql").read_text())


# The limit-aware claim, written whole in its file; its two lock statements as the file writes
# them, which the race tests' lockless mutant removes (tests/concurrency).
CLAIM_LIMITED_FUNCTION = _without_leading_comments((_HERE / "mantle_claim_limited.sql").read_text())
CLAIM_LOCKS_IN_FUNCTION = dict(
    zip(
        ("step_limit_lock", "step_rate_lock"),
        re.findall(r"PERFORM pg_advisory_xact_lock\(\w+, \w+::int\)", CLAIM_LIMITED_FUNCTION),
        strict=True,
    )
)

# The room of every limit, read by admission and promotion alike (mantle_room.sql: several
# functions), and promotion: the full fair ranking, its flat-cost reader over fair promotion's
# cursor, and the promotion itself.
ROOM_FUNCTIONS = _without_leading_comments((_HERE / "mantle_room.sql").read_text())
FAIR_QUEUE_FUNCTION = _without_leading_comments((_HERE / "mantle_fair_queue.sql").read_text())
FAIR_HEADS_FUNCTION = _without_leading_comments((_HERE / "mantle_fair_heads.sql").read_text())
PROMOTE_FUNCTION = _without_leading_comments((_HERE / "mantle_promote.sql").read_text())
# ... and the trigger function that keeps fair promotion's cursor.
QUEUED_TURN_FUNCTION = _without_leading_comments((_HERE / "mantle_queued_turn.sql").read_text())

# The lockless test of a terminal commit's promotion (mantle_promotion_owed.sql).
PROMOTION_OWED_FUNCTION = _without_leading_comments(
    (_HERE / "mantle_promotion_owed.sql").read_text()
)

TRIGGERS = (_HERE / "triggers.sql").read_text()

# What the executions' migrations install (every statement replaces what it creates) and take
# back. Each migration that installs runs the files as they are now, so the bodies of the
# LANGUAGE sql functions are checked when called, not when created: an earlier migration
# creates them before the tables a later one adds.
INSTALL = "\n;\n".join(
    (
        "SET LOCAL check_function_bodies = off",
        ROOM_FUNCTIONS,
        FAIR_QUEUE_FUNCTION,
        ADMIT_FUNCTION,
        ADMIT_DUE_FUNCTIONS,
        CLAIM_LIMITED_FUNCTION,
        FAIR_HEADS_FUNCTION,
        QUEUED_TURN_FUNCTION,
        PROMOTION_OWED_FUNCTION,
        PROMOTE_FUNCTION,
        TRIGGERS,
    )
)
UNINSTALL = """
DROP TRIGGER execution_queued_turn ON executions_execution;
DROP FUNCTION mantle_promote;
DROP FUNCTION mantle_promotion_owed;
DROP FUNCTION mantle_queued_turn;
DROP FUNCTION mantle_fair_heads;
DROP FUNCTION mantle_claim_limited;
DROP FUNCTION mantle_admit_due;
DROP FUNCTION mantle_queue_behind;
DROP FUNCTION mantle_admit;
DROP FUNCTION mantle_fair_queue;
DROP FUNCTION mantle_queued_limit_sets;
DROP FUNCTION mantle_oldest_key_holder;
DROP FUNCTION mantle_holding_keys;
DROP FUNCTION mantle_rate_room;
DROP FUNCTION mantle_key_room;
DROP FUNCTION mantle_limit_room;
DROP FUNCTION mantle_workflow_room;
DROP FUNCTION mantle_team_room;
DROP TRIGGER step_team ON executions_stepexecution;
DROP FUNCTION mantle_step_team();
DROP TRIGGER named_limit_raised_notify ON teams_namedlimit;
DROP TRIGGER step_limit_freed_notify ON executions_stepexecution;
DROP TRIGGER step_waiting_notify ON executions_stepexecution;
DROP TRIGGER step_pending_notify ON executions_stepexecution;
DROP TRIGGER execution_pending_notify ON executions_execution;
DROP FUNCTION mantle_notify_work();
"""


def prepared_cursor(connection: BaseDatabaseWrapper) -> CursorWrapper:
    """A cursor binding its parameters on the server, so that a statement it runs often is
    prepared once per connection (after `prepare_threshold` runs; never through a transaction
    pooler: mantle_site.settings). Django's own cursors bind on the client and never prepare.
    Wrapped as Django wraps its own: errors as django.db errors, execute_wrapper, query logging."""
    connection.ensure_connection()
    wrapper = CursorDebugWrapper if connection.queries_logged else CursorWrapper
    return wrapper(psycopg.Cursor(connection.connection), connection)
