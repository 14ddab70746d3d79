"""What migrations set on Mantle's database itself, and how settings connect to it."""

from __future__ import annotations

import importlib

import psycopg

from mantle_site.settings import _database, pooled
from tests.processes import database_url

JIT_OFF = importlib.import_module("mantle_site.migrations.0001_jit_off").JIT_OFF


def test_a_new_session_of_the_database_has_jit_off(test_database_url: str) -> None:
    with psycopg.connect(database_url()) as connection:
        assert connection.execute("SHOW jit").fetchone() == ("off",)


def test_the_session_that_migrates_has_jit_off_too(test_database_url: str) -> None:
    """The database's setting reaches only sessions started after it: the migration sets its
    own session too (a test run or a benchmark goes on working on the connection it migrated
    with)."""
    with psycopg.connect(database_url(), autocommit=True) as connection:
        connection.execute("SET jit = on")
        connection.execute(JIT_OFF)
        assert connection.execute("SHOW jit").fetchone() == ("off",)


def test_a_pooled_database_prepares_nothing_and_holds_no_cursor() -> None:
    direct = _database("postgresql://mantle@db.example/mantle")
    assert direct["OPTIONS"]["prepare_threshold"] == 5
    through_a_pooler = pooled(direct)
    assert through_a_pooler["OPTIONS"]["prepare_threshold"] is None
    assert through_a_pooler["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert direct["OPTIONS"]["prepare_threshold"] == 5, "the direct settings are left as they were"
