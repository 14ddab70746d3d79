"""The invariant watcher of the multi-host tests: slot holders per workflow and per team, read in
a loop on a connection of its own straight to the database host's PostgreSQL."""

from __future__ import annotations

import threading
import time

import psycopg

HOLDERS_SQL = """
SELECT w.name, count(*) FROM executions_execution e
  JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
  JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = %s AND e.status IN ('pending', 'running') AND NOT e.forced
 GROUP BY w.name
"""


class Sampler(threading.Thread):
    def __init__(self, url: str, team: str) -> None:
        super().__init__(daemon=True)
        self.url, self.team = url, team
        self.samples = 0
        self.max_team = 0
        self.max_per_workflow: dict[str, int] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as conn:
                    while not self.halt.is_set():
                        rows = conn.execute(HOLDERS_SQL, [self.team]).fetchall()
                        self.samples += 1
                        self.max_team = max(self.max_team, sum(n for _, n in rows))
                        for name, n in rows:
                            self.max_per_workflow[name] = max(self.max_per_workflow.get(name, 0), n)
                        time.sleep(0.002)
            except psycopg.OperationalError:
                time.sleep(0.05)

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.join(timeout=10)
