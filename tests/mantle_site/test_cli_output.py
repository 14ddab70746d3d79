"""Stored text printed by the `mantle` script cannot forge a line or drive the terminal
(docs/hostile-input.md, Terminal output)."""

from __future__ import annotations

import io

from core.terminal import TerminalSafe, printable
from executions.models import Execution
from executions.services.admission import execution_admit
from tests.mantle_site.test_cli import mantle

HOSTILE = "boom\nFORGED-LOG-LINE\x1b]0;owned\x07\x1b[2J\r\u202eevil"
SPELLED = "boom\\nFORGED-LOG-LINE\\x1b]0;owned\\x07\\x1b[2J\\r\\u202eevil"


def test_printable_spells_every_control_character_out() -> None:
    assert printable(HOSTILE) == SPELLED
    assert printable("café ✓ 日本 \U0001f600") == "café ✓ 日本 \U0001f600"
    assert printable("\x00\x7f\x9b\t") == "\\x00\\x7f\\x9b\\t"


def test_the_script_streams_keep_only_newlines_and_tabs() -> None:
    out = io.StringIO()
    TerminalSafe(out).write("a\tb\nc\x1b[2Jd\x07\r\n")  # type: ignore[arg-type]
    assert out.getvalue() == "a\tb\nc\\x1b[2Jd\\x07\\r\n"


def test_status_prints_a_hostile_error_on_one_escaped_line(test_database_url, team, make_workflow):
    workflow = make_workflow(team)
    execution = execution_admit(team=team, workflow=workflow, inputs={}).execution
    Execution.objects.filter(id=execution.id).update(status="failed", error=HOSTILE)
    execution.steps.create(name="only", status="failed", error=HOSTILE)
    done = mantle("status", str(execution.id), database_url=test_database_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "failed",
        f"error: {SPELLED}",
        f"  only  failed  attempt 1  {SPELLED}",
    ]
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
