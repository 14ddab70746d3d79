"""The invariant watcher of the multi-host tests: slot holders per key, workflow and team, read in
a loop on a connection of its own straight to the database host's PostgreSQL."""

from __future__ import annotations

import threading
import time

import psycopg

HOLDERS_SQL = """
SELECT w.name, e.concurrency_key, count(*) FROM executions_execution e
  JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
  JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = %s AND e.status IN ('pending', 'running') AND NOT e.forced
 GROUP BY w.name, e.concurrency_key
"""


class Sampler(threading.Thread):
    def __init__(self, url: str, team: str) -> None:
        super().__init__(daemon=True)
        self.url, self.team = url, team
        self.samples = 0
        self.max_team = 0
        self.max_per_workflow: dict[str, int] = {}
        self.max_per_key: dict[tuple[str, str], int] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as conn:
                    while not self.halt.is_set():
                        rows = conn.execute(HOLDERS_SQL, [self.team]).fetchall()
                        self.samples += 1
                        self.record(rows)
                        time.sleep(0.002)
            except psycopg.OperationalError:
                time.sleep(0.05)

    def record(self, rows: list[tuple[str, str, int]]) -> None:
        self.max_team = max(self.max_team, sum(n for *_, n in rows))
        per_workflow: dict[str, int] = {}
        for name, key, n in rows:
            per_workflow[name] = per_workflow.get(name, 0) + n
            self.max_per_key[name, key] = max(self.max_per_key.get((name, key), 0), n)
        for name, n in per_workflow.items():
            self.max_per_workflow[name] = max(self.max_per_workflow.get(name, 0), n)

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.join(timeout=10)
