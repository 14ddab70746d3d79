"""Race harness: real threads, each on its own database connection, and a sampler that checks the
invariant "slot holders ≤ limit" continuously on a connection of its own."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import OperationalError, connection, connections
from psycopg import errors as pg_errors

HOLDERS_SQL = """
SELECT workflow_id, count(*) FROM executions_execution
 WHERE team_id = %s AND status IN ('pending', 'running') AND NOT forced
 GROUP BY workflow_id
"""


class CountSampler(threading.Thread):
    """Runs SQL (rows of group, count) in a loop on a connection of its own, every `pause`
    seconds; keeps the most seen at once, in all (`most`) and per group (`most_per_group`)."""

    SQL = ""
    pause = 0.0

    def __init__(self, *params: object) -> None:
        super().__init__(daemon=True)
        self.params = params
        self.most = 0
        self.most_per_group: dict[object, int] = {}
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                with connection.cursor() as cursor:
                    cursor.execute(self.SQL, self.params)
                    rows = cursor.fetchall()
                self.samples += 1
                self.most = max(self.most, sum(count for _, count in rows))
                for group, count in rows:
                    self.most_per_group[group] = max(self.most_per_group.get(group, 0), count)
                self._halt.wait(self.pause)
        finally:
            connection.close()

    def stop(self) -> CountSampler:
        self._halt.set()
        self.join(timeout=10)
        return self


class Sampler(CountSampler):
    """Slot holders per workflow of one team: Sampler(team_id)."""

    SQL = HOLDERS_SQL

    @property
    def max_team(self) -> int:
        return self.most

    @property
    def max_per_workflow(self) -> dict[object, int]:
        return self.most_per_group


def is_deadlock(error: BaseException) -> bool:
    """PostgreSQL broke a deadlock by failing this statement. Only the lockless mutants meet one:
    without the advisory locks, admissions and promotions update the same rows (executions, key
    turns) in different orders. The locked tests' outcome checks refuse it."""
    return isinstance(error, OperationalError) and isinstance(
        error.__cause__, pg_errors.DeadlockDetected
    )


def status_or_deadlock(admit: Callable[[], str]) -> str:
    """`admit()`'s status, or "deadlock" (is_deadlock): the lockless mutants' floods go on past
    one, and the locked tests' outcome checks refuse it."""
    try:
        return admit()
    except OperationalError as error:
        if not is_deadlock(error):
            raise
        return "deadlock"


def run_in_threads(jobs: list[Callable[[], object]], *, threads: int) -> list[object]:
    """Run the jobs on `threads` threads, start barrier first; each thread closes its connection.

    Each job connects before the barrier, so that connecting (a fork of the server, slow under
    load) does not spread out the jobs the barrier lines up."""
    barrier = threading.Barrier(min(threads, len(jobs)))

    def call(job: Callable[[], object]) -> object:
        try:
            connection.ensure_connection()
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=0.5)
            return job()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [future.result() for future in [pool.submit(call, job) for job in jobs]]


KEY_HOLDERS_SQL = """
SELECT concurrency_key, count(*) FROM executions_execution
 WHERE workflow_id = %s AND status IN ('pending', 'running') AND NOT forced
 GROUP BY concurrency_key
"""


class KeySampler(CountSampler):
    """Slot holders per key of one workflow: KeySampler(workflow_id); `most` is the workflow's
    (the sum over its keys, from the same snapshot)."""

    SQL = KEY_HOLDERS_SQL


UNITS_SQL = """
SELECT 'units', coalesce(sum(limit_units[array_position(limit_ids, %s)]), 0)
  FROM executions_stepexecution
 WHERE status = 'running' AND limit_ids @> ARRAY[%s]::bigint[]
"""


class UnitSampler(CountSampler):
    """Units of one step-scope limit held by running steps, summed from their rows in one
    snapshot: UnitSampler(limit_id); `most` is the most held at once."""

    SQL = UNITS_SQL

    def __init__(self, limit_id: int, *, pause: float = 0.0) -> None:
        super().__init__(limit_id, limit_id)
        self.pause = pause
