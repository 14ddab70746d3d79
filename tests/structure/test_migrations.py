"""Structural checks whose failure message says how to fix it."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.db import connection

from executions import sql


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


# The database's own text of what executions/sql installs, to compare with the files.
_INSTALLED = """
SELECT p.proname, p.prosrc FROM pg_proc p
 WHERE p.proname IN ('mantle_admit', 'mantle_claim_limited', 'mantle_fair_heads',
                     'mantle_queued_turn', 'mantle_promotion_owed', 'mantle_notify_work',
                     'mantle_step_team', 'mantle_promote', 'mantle_fair_queue',
                     'mantle_team_room', 'mantle_workflow_room', 'mantle_limit_room',
                     'mantle_key_room', 'mantle_rate_room', 'mantle_holding_keys',
                     'mantle_oldest_key_holder')
"""
_TRIGGERS = """
SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t WHERE NOT t.tgisinternal
"""


def _body(function: str) -> str:
    """The text between a function's dollar quotes, as PostgreSQL keeps it (pg_proc.prosrc)."""
    match = re.search(r"\bAS (\$\w*\$)", function)
    assert match, function[:200]
    return function.split(match.group(1))[1]


@pytest.mark.django_db
def test_the_database_runs_the_functions_and_triggers_the_files_say():
    with connection.cursor() as cursor:
        cursor.execute(_INSTALLED)
        installed = dict(cursor.fetchall())
        cursor.execute(_TRIGGERS)
        triggers = {name for name, _ in cursor.fetchall()}
    files = {
        "mantle_admit": sql.ADMIT_FUNCTION,
        "mantle_claim_limited": sql.CLAIM_LIMITED_FUNCTION,
        "mantle_fair_heads": sql.FAIR_HEADS_FUNCTION,
        "mantle_queued_turn": sql.QUEUED_TURN_FUNCTION,
        "mantle_promotion_owed": sql.PROMOTION_OWED_FUNCTION,
        "mantle_notify_work": sql.TRIGGERS.split("FUNCTION mantle_notify_work()")[1],
        "mantle_step_team": sql.TRIGGERS.split("FUNCTION mantle_step_team()")[1],
        "mantle_promote": sql.PROMOTE_FUNCTION,
        "mantle_fair_queue": sql.FAIR_QUEUE_FUNCTION,
        **{
            room: sql.ROOM_FUNCTIONS.split(f"FUNCTION {room}(")[1]
            for room in (
                "mantle_team_room",
                "mantle_workflow_room",
                "mantle_limit_room",
                "mantle_key_room",
                "mantle_rate_room",
                "mantle_holding_keys",
                "mantle_oldest_key_holder",
            )
        },
    }
    for name, text in files.items():
        assert installed.get(name) == _body(text), (
            f"the database's {name} is not what executions/sql says: a change to it needs a "
            "migration that runs executions.sql.INSTALL (docs/architecture.md, The data room)"
        )
    assert triggers == set(re.findall(r"CREATE OR REPLACE TRIGGER (\w+)", sql.TRIGGERS))
