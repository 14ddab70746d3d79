"""What migrations set on Mantle's database itself."""

from __future__ import annotations

import psycopg

from tests.processes import database_url


def test_a_new_session_of_the_database_has_jit_off(test_database_url: str) -> None:
    with psycopg.connect(database_url()) as connection:
        assert connection.execute("SHOW jit").fetchone() == ("off",)
