"""SQL has one home, the data room (executions/, its statements in executions/sql/): every named
query is used, every name used exists, and no other room runs SQL but those listed."""

from __future__ import annotations

import re
from pathlib import Path

from executions import sql
from executions.models import QUEUED_OR_HOLDING, SLOT_HOLDING, TERMINAL, Status
from teams.models import ApiKey, Team
from workflows.models import WebhookPath, WorkflowDefinition, WorkflowVersion

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["mantle_site", "core", "teams", "workflows", "executions", "engine", "api", "dashboard"]
USE = re.compile(r"queries\[\s*\"(\w+)\"\s*\]")
PLACEHOLDER = re.compile(r"\{[a-z_]+(?::[a-z]+)?\}")


def _uses() -> dict[str, set[str]]:
    """Every queries["<name>"] of the product and the benchmarks, by file."""
    uses: dict[str, set[str]] = {}
    for folder in [*PRODUCT, "bench"]:
        for path in (ROOT / folder).rglob("*.py"):
            names = set(USE.findall(path.read_text()))
            if names:
                uses[str(path.relative_to(ROOT))] = names
    return uses


def test_no_statement_is_assembled_from_others():
    """Every .sql file runs in psql as written: no `{name}` placeholder is expanded into it."""
    assembled = sorted(
        path.name
        for path in (ROOT / "executions" / "sql").glob("*.sql")
        if PLACEHOLDER.search(path.read_text())
    )
    assert not assembled, f"{{name}} placeholders in {assembled}: write the statement out whole"


def test_every_named_query_is_used():
    used = set().union(*_uses().values())
    unused = sorted(set(sql.queries) - used)
    assert not unused, (
        f"named queries used nowhere: {unused}. Delete their `-- name:` blocks from "
        'executions/sql/*.sql, or run them as queries["<name>"] (from executions.sql import '
        "queries)"
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


# The execution statuses a statement of the data room may write out as a list: each set the
# models name (executions.models), as the statements write them.
NAMED_STATUSES = {
    "SLOT_HOLDING": set(SLOT_HOLDING),
    "QUEUED_OR_HOLDING": set(QUEUED_OR_HOLDING),
    "TERMINAL": set(TERMINAL),
}
STATUS_LIST = re.compile(r"\bIN\s*\(\s*('\w+'(?:\s*,\s*'\w+')*)\s*\)")


def test_every_status_list_the_sql_writes_is_one_the_models_name():
    """A list of execution statuses in a statement (`status IN ('pending', 'running')`) is one of
    the models' sets, so a status added to one of them fails here until every list has it."""
    statuses = set(Status.values)
    unnamed = []
    for path in sorted((ROOT / "executions" / "sql").glob("*.sql")):
        for match in STATUS_LIST.finditer(path.read_text()):
            written = set(re.findall(r"'(\w+)'", match.group(1)))
            if written <= statuses and written not in NAMED_STATUSES.values():
                line = path.read_text().count("\n", 0, match.start()) + 1
                unnamed.append(f"{path.name}:{line}: {match.group(0)}")
    assert not unnamed, (
        f"execution status lists that are none of the models' sets: {unnamed}. Write the "
        f"statuses of one of {sorted(NAMED_STATUSES)} (executions/models/execution.py), all of them"
    )


def test_python_names_the_slot_holding_statuses():
    """Python reads the statuses that hold a slot from models.SLOT_HOLDING."""
    literal = re.compile(r"'pending',\s*'running'")
    written = [
        str(path.relative_to(ROOT))
        for folder in PRODUCT
        for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.parts and literal.search(path.read_text())
    ]
    assert not written, (
        f"('pending', 'running') written out in {written}: use executions.models.SLOT_HOLDING"
    )


# Where a statement may run besides the data room (executions/: its .sql files, the services and
# selectors that run them, typed rows): each place with why. The list only shrinks.
DATA_ROOM = "executions"
RAW_SQL = re.compile(r"cursor\.execute\(|\.cursor\(\)")
SQL_ELSEWHERE = {
    "core/locks.py": "the advisory locks and the session-scoped connections, below every room "
    "(docs/architecture.md, The data room)",
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
