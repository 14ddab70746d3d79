"""Race harness: real threads, each on its own database connection, and a sampler that checks the
invariant "slot holders ≤ limit" continuously on a connection of its own."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import connection, connections

HOLDERS_SQL = """
SELECT workflow_id, count(*) FROM executions_execution
 WHERE team_id = %s AND status IN ('pending', 'running') AND NOT forced
 GROUP BY workflow_id
"""


class Sampler(threading.Thread):
    """Reads slot holders per workflow of one team in a loop; keeps the maxima seen."""

    def __init__(self, team_id: int) -> None:
        super().__init__(daemon=True)
        self.team_id = team_id
        self.max_team = 0
        self.max_per_workflow: dict[int, int] = {}
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                with connection.cursor() as cursor:
                    cursor.execute(HOLDERS_SQL, [self.team_id])
                    rows = cursor.fetchall()
                self.samples += 1
                self.max_team = max(self.max_team, sum(count for _, count in rows))
                for workflow_id, count in rows:
                    seen = self.max_per_workflow.get(workflow_id, 0)
                    self.max_per_workflow[workflow_id] = max(seen, count)
        finally:
            connection.close()

    def stop(self) -> Sampler:
        self._halt.set()
        self.join(timeout=10)
        return self


def run_in_threads(jobs: list[Callable[[], object]], *, threads: int) -> list[object]:
    """Run the jobs on `threads` threads, start barrier first; each thread closes its connection."""
    barrier = threading.Barrier(min(threads, len(jobs)))

    def call(job: Callable[[], object]) -> object:
        try:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=0.5)
            return job()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [future.result() for future in [pool.submit(call, job) for job in jobs]]
