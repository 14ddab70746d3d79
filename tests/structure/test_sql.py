"""SQL has one home, executions/sql/: every named query is used, and every name used exists."""

from __future__ import annotations

import re
from pathlib import Path

from executions import sql

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


def test_the_slot_holding_statuses_are_written_once():
    """The statuses that hold a slot come from models.SLOT_HOLDING through {slot_holding}."""
    literal = re.compile(r"'pending',\s*'running'")
    written = [
        str(path.relative_to(ROOT))
        for folder in PRODUCT
        for path in (ROOT / folder).rglob("*")
        if path.suffix in {".py", ".sql"}
        and "migrations" not in path.parts
        and literal.search(path.read_text())
    ]
    assert not written, (
        f"('pending', 'running') written out in {written}: write {{slot_holding}} in a named "
        "query of executions/sql/, or use executions.models.SLOT_HOLDING in Python"
    )
