"""Fixtures of the race harness (tests/concurrency/harness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.db import connection

from core import locks
from executions import sql
from tests.concurrency.harness import Sampler


@pytest.fixture
def sampler() -> Iterator[Callable[[int], Sampler]]:
    started: list[Sampler] = []

    def start(team_id: int) -> Sampler:
        sampler = Sampler(team_id)
        sampler.start()
        started.append(sampler)
        return sampler

    yield start
    for sampler in started:
        sampler.stop()


@pytest.fixture
def without_locks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The bug the race tests must catch: admission and promotion without advisory locks.

    Their locks are statements of mantle_admit and mantle_promote: each installed function is
    replaced by its own source (pg_get_functiondef, so the variant cannot drift) without them,
    and with a sleep between its reads and its writes to widen the race window. The services
    that lock from Python (a pause, a limit's change) lose theirs too."""
    monkeypatch.setattr(locks, "lock_team", lambda team_id: None)
    monkeypatch.setattr(locks, "lock_named_limits", lambda limit_ids: None)
    monkeypatch.setattr(locks, "lock_workflows", lambda workflow_ids: None)
    originals = []
    with connection.cursor() as cursor:
        for function, (count, write) in sql.LOCKS_IN_FUNCTION.items():
            cursor.execute("SELECT pg_get_functiondef(%s::regproc)", [function])
            original = cursor.fetchone()[0]
            unlocked, found = sql.LOCK_STATEMENT.subn("PERFORM 1;", original)
            assert found == count, (function, found)
            assert unlocked.count(write) == 1, (function, write)
            unlocked = unlocked.replace(write, f"PERFORM pg_sleep(0.02);\n{write}")
            cursor.execute(unlocked)
            originals.append(original)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for original in originals:
                cursor.execute(original)


@pytest.fixture
def claim_without_locks() -> Iterator[None]:
    """The bug the step-limit race tests must catch: the limit-aware claim without its limits'
    locks. The installed mantle_claim_limited is replaced by its own source (pg_get_functiondef,
    so the variant cannot drift) without the lock, and with a sleep between the count and the
    claims to widen the race window; every worker process runs it at once."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('mantle_claim_limited'::regproc)")
        original = cursor.fetchone()[0]
        unlocked = original
        for statement in sql.CLAIM_LOCKS_IN_FUNCTION.values():
            assert unlocked.count(statement) == 1
            unlocked = unlocked.replace(statement, "PERFORM 1")
        counted = "     WHERE l.id = ANY(_locked) AND l.max > 0;"
        assert unlocked.count(counted) == 1
        unlocked = unlocked.replace(counted, counted + "\n    PERFORM pg_sleep(0.005);")
        cursor.execute(unlocked)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(original)
