"""A count past its bound on the command line is exit 2 naming the bound, never a traceback
(docs/hostile-input.md, Bounds)."""

from __future__ import annotations

import pytest

from teams.models import NamedLimit, Team
from tests.mantle_site.test_cli import mantle

HOSTILE = ["-1", str(2**31), str(2**63), str(10**20), "NaN", "inf", "1e20", "9" * 5000]
COMMANDS = [
    ("teams", "set-limit", "acme", "{}"),
    ("teams", "create", "new", "--max-concurrent", "{}"),
    ("limits", "set", "acme", "db", "{}"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_count_past_its_bound_is_exit_2(test_database_url, team, command) -> None:
    for value in HOSTILE:
        done = mantle(*(part.format(value) for part in command), database_url=test_database_url)
        assert done.returncode == 2, (value, done.stderr)
        assert "Traceback" not in done.stderr
        assert "must be an integer from 0 to 2147483647" in done.stderr
    assert Team.objects.get().max_concurrent_executions is None
    assert not NamedLimit.objects.exists()


def test_the_largest_count_is_accepted(test_database_url, team) -> None:
    done = mantle("teams", "set-limit", "acme", str(2**31 - 1), database_url=test_database_url)
    assert done.returncode == 0, done.stderr
    assert Team.objects.get().max_concurrent_executions == 2**31 - 1
