"""Racing admissions through admit_resolved (a web process's cached resolution, checked in the
admission's statement): its Idempotency-Key check reads before the locks, so two racers with one
key both pass it; the unique index keeps the key once and the loser answers with the original."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.db import connection

from core.locks import Namespace
from executions.models import Execution
from executions.services.admission import Admission, ResolutionStale, Resolved
from executions.services.idempotency import execution_admit_once
from teams.models import ApiKey
from tests.concurrency.harness import run_in_threads
from tests.factories import ApiKeyFactory

pytestmark = pytest.mark.django_db(transaction=True)

RACERS = 16
WAITING_FOR_THE_TEAM = """
SELECT count(*) FROM pg_locks
 WHERE locktype = 'advisory' AND NOT granted AND classid = %s AND objid = %s
"""


def race(make_team, make_workflow) -> list[Admission]:  # type: ignore[no-untyped-def]
    team = make_team()
    workflow = make_workflow(team)
    api_key, _ = ApiKeyFactory(team=team)
    resolved = Resolved(key_hash=ApiKey.objects.get(id=api_key.id).key_hash)

    def admit_once(resolved: Resolved | None) -> Admission:
        return execution_admit_once(
            team=team,
            workflow=workflow,
            inputs=None,
            trigger={"type": "api"},
            idempotency_key="race",
            resolved=resolved,
        )

    def admit() -> Admission:
        # As the views do: a racer that finds the key already used resolves again, without it.
        try:
            return admit_once(resolved)
        except ResolutionStale:
            return admit_once(None)

    # Every racer passes the check before any of them admits: the team's lock is held until all
    # of them wait for it (the check reads before the locks), however the threads are scheduled.
    lock = (Namespace.TEAM, team.id)
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s, %s)", lock)
        with ThreadPoolExecutor(max_workers=1) as pool:
            racing = pool.submit(run_in_threads, [admit] * RACERS, threads=RACERS)
            deadline = time.monotonic() + 60
            while holder.execute(WAITING_FOR_THE_TEAM, lock).fetchone() != (RACERS,):
                assert not racing.done(), racing.result()
                assert time.monotonic() < deadline, "the racers never all waited for the team"
                time.sleep(0.01)
            holder.execute("SELECT pg_advisory_unlock(%s, %s)", lock)
            return racing.result()  # type: ignore[return-value]


def test_racing_resolved_admissions_with_one_key_admit_one(make_team, make_workflow):
    admissions = race(make_team, make_workflow)
    assert Counter(a.replayed for a in admissions) == {False: 1, True: RACERS - 1}
    assert len({a.execution.id for a in admissions}) == 1
    assert Execution.objects.count() == 1


@pytest.fixture
def without_the_idempotency_index() -> Iterator[None]:
    """The bug the race test must catch: only the statement's check keeps a key once."""
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX execution_idempotency_key")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM executions_execution")
        cursor.execute(
            "CREATE UNIQUE INDEX execution_idempotency_key ON executions_execution"
            " (team_id, idempotency_key) WHERE idempotency_key IS NOT NULL"
        )


def test_without_the_index_the_check_alone_admits_more_than_one(
    make_team, make_workflow, without_the_idempotency_index
):
    """Proof that the race test can fail: the check reads before the locks, so racers pass it."""
    admissions = race(make_team, make_workflow)
    admitted = sum(not a.replayed for a in admissions)
    print(f"\nwithout the index: {admitted} of {RACERS} racers admitted under one key")
    assert admitted > 1
