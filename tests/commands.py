"""Run a management command in this process as `mantle <command>` would, for the command tests."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=out)
    return out.getvalue()


def exit_code(*args: str) -> int:
    with pytest.raises(CommandError) as raised:
        run(*args)
    return raised.value.returncode
