"""Figure 11's load on the database (bench/ops.py): finished executions seeded in one statement,
admissions by CLIENTS threads measured, and the execution and step tables' size."""

from __future__ import annotations

import random
import threading
import time

from django.db import connection, connections

from bench import fixtures
from executions.services.admission import execution_admit

CLIENTS = 16

TABLES_SIZE_SQL = """
SELECT pg_total_relation_size('executions_execution')
     + pg_total_relation_size('executions_stepexecution')
"""

FINISHED_SQL = """
WITH made AS (
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, error,
        concurrency_key, priority, created_at, started_at, completed_at)
SELECT gen_random_uuid(), %(team_id)s, %(workflow_id)s, %(version_id)s, %(status)s, '{}', '{}',
       false, '', '', 0, %(at)s, %(at)s, %(at)s
  FROM generate_series(1, %(rows)s) g
RETURNING id)
INSERT INTO executions_stepexecution
       (execution_id, team_id, name, status, attempt, output, error, lease_owner, limit_ids,
        limit_units, rate_units, rate_key, created_at, completed_at)
SELECT id, %(team_id)s, s, 'completed', 1, '{"rows": [1, 2, 3], "text": "an output"}', '', '',
       '{}', '{}', 0, '', %(at)s, %(at)s
  FROM made, unnest(%(steps)s::text[]) s
"""


def finished_rows(
    target: fixtures.Target, rows: int, *, at: object, status: str = "completed", steps: int = 1
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            FINISHED_SQL,
            {
                "team_id": target.team.id,
                "workflow_id": target.workflow.id,
                "version_id": target.workflow.current_version_id,
                "status": status,
                "rows": rows,
                "at": at,
                "steps": [f"s{n}" for n in range(steps)],
            },
        )


def admissions(targets: list[fixtures.Target], seconds: float) -> tuple[float, list[float]]:
    """Admissions per second by CLIENTS threads for `seconds`, and each one's latency (ms)."""
    latencies: list[list[float]] = [[] for _ in range(CLIENTS)]
    deadline = time.perf_counter() + seconds
    errors: list[BaseException] = []

    def client(index: int) -> None:
        rng = random.Random(index)
        try:
            while time.perf_counter() < deadline:
                target = targets[rng.randrange(len(targets))]
                began = time.perf_counter()
                execution_admit(team=target.team, workflow=target.workflow)
                latencies[index].append((time.perf_counter() - began) * 1000)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    every = [latency for own in latencies for latency in own]
    return len(every) / (time.perf_counter() - start), every


def tables_mb() -> float:
    with connection.cursor() as cursor:
        cursor.execute(TABLES_SIZE_SQL)
        return float(cursor.fetchone()[0]) / 2**20
