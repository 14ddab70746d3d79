"""SQL has one home, the data room (executions/, its statements in executions/sql/): every named
query is used, every name used exists, and no other room runs SQL but those listed."""

from __future__ import annotations

import re
from pathlib import Path

from executions import sql
from executions.models import SLOT_HOLDING
from teams.models import ApiKey, Team
from workflows.models import WebhookPath, WorkflowDefinition, WorkflowVersion

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["mantle_site", "core", "teams", "workflows", "executions", "engine", "api", "dashboard"]
USE = re.compile(r"queries\[\s*\"(\w+)\"\s*\]")
INCLUDE = re.compile(r"\{(\w+)(?::\w+)?\}")


def _uses() -> dict[str, set[str]]:
    """Every queries["<name>"] of the product and the benchmarks, by file."""
    uses: dict[str, set[str]] = {}
    for folder in [*PRODUCT, "bench"]:
        for path in (ROOT / folder).rglob("*.py"):
            names = set(USE.findall(path.read_text()))
            if names:
                uses[str(path.relative_to(ROOT))] = names
    return uses


def _includes() -> set[str]:
    return {
        name
        for path in (ROOT / "executions" / "sql").glob("*.sql")
        for name in INCLUDE.findall(path.read_text())
    }


def test_every_named_query_is_used():
    used = set().union(*_uses().values()) | _includes()
    unused = sorted(set(sql.queries) - used)
    assert not unused, (
        f"named queries used nowhere: {unused}. Delete their `-- name:` blocks from "
        'executions/sql/*.sql, or run them as queries["<name>"] (from executions.sql import '
        "queries), or include them in another block as {<name>}"
    )


def test_every_query_the_code_names_exists():
    missing = {
        f"{file}: {sorted(names - set(sql.queries))}"
        for file, names in _uses().items()
        if names - set(sql.queries)
    }
    assert not missing, (
        f"queries[...] names no block: {sorted(missing)}. Add a `-- name: <name>` block to a "
        "file in executions/sql/ (SQL lives there, not in Python strings), or fix the name"
    )


# The file where the rules of every limit are written once, in whole SQL: the slot-holding
# statuses are written out there (docs/architecture.md, Where the rules live).
ROOM = ROOT / "executions" / "sql" / "mantle_room.sql"


def test_the_slot_holding_statuses_are_written_once():
    """The statuses that hold a slot come from models.SLOT_HOLDING through {slot_holding}, and
    are written out only in mantle_room.sql, as the model says them."""
    literal = re.compile(r"'pending',\s*'running'")
    written = [
        str(path.relative_to(ROOT))
        for folder in PRODUCT
        for path in (ROOT / folder).rglob("*")
        if path.suffix in {".py", ".sql"}
        and "migrations" not in path.parts
        and path != ROOM
        and literal.search(path.read_text())
    ]
    assert not written, (
        f"('pending', 'running') written out in {written}: write {{slot_holding}} in a named "
        "query of executions/sql/, call a function of mantle_room.sql, or use "
        "executions.models.SLOT_HOLDING in Python"
    )
    holding = "(" + ", ".join(f"'{status}'" for status in SLOT_HOLDING) + ")"
    lists = re.findall(r"status IN (\([^)]*\))", ROOM.read_text())
    assert lists and set(lists) == {holding}, (lists, holding)


# Where a statement may run besides the data room (executions/: its .sql files, the services and
# selectors that run them, typed rows): each place with why. The list only shrinks.
DATA_ROOM = "executions"
RAW_SQL = re.compile(r"cursor\.execute\(|\.cursor\(\)")
SQL_ELSEWHERE = {
    "core/locks.py": "the advisory locks, below every room (docs/architecture.md, lock order)",
    "api/health.py": "the health probe's one read of the server's role",
    "engine/dispatch.py": "the claims, being rewritten: to move into the data room",
    "engine/orchestrator.py": "the advance's lock of its executions: to move into the data room",
    "engine/reaper.py": "the reaper's expired leases: to move into the data room",
}


def test_sql_runs_in_the_data_room_only():
    running = set()
    for folder in PRODUCT:
        for path in (ROOT / folder).rglob("*.py"):
            module = str(path.relative_to(ROOT))
            if folder == DATA_ROOM or "migrations" in path.parts:
                continue
            if RAW_SQL.search(path.read_text()):
                running.add(module)
    outside = sorted(running - set(SQL_ELSEWHERE))
    assert not outside, (
        f"SQL runs outside the data room in {outside}: write the statement as a named block of "
        "executions/sql/*.sql and run it from a selector or service of executions/ that returns "
        "typed rows (executions.sql.rows.rows_as), and call that"
    )
    gone = sorted(set(SQL_ELSEWHERE) - running)
    assert not gone, f"{gone} run no SQL any more: take them off SQL_ELSEWHERE"


def test_a_requests_resolution_reads_every_field_but_a_versions_body():
    """executions/sql/resolution.sql names its columns: a field added to one of its models must
    be read there too, or admission reads it in a query of its own on every request."""
    models = {"team": Team, "workflow": WorkflowDefinition, "version": WorkflowVersion}
    unread = set()
    for name, own in (
        ("api_key_with_workflow", ("key", ApiKey)),
        ("webhook_by_path", ("hook", WebhookPath)),
    ):
        named = set(re.findall(r'AS "(\w+\.\w+)"', sql.queries[name]))
        for prefix, model in [own, *models.items()]:
            fields = {f"{prefix}.{field.attname}" for field in model._meta.concrete_fields}
            unread |= {f"{name}: {field}" for field in fields - named}
    unread -= {
        f"{name}: version.{body}"
        for name in ("api_key_with_workflow", "webhook_by_path")
        for body in ("content", "spec")
    }
    assert not unread, (
        f"fields the request path does not read: {sorted(unread)}. Add each to the SELECT of its "
        'block in executions/sql/resolution.sql as <alias>.<column> AS "<model>.<field>"'
    )
