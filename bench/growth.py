"""Figure 4: admission throughput with 0 and with N finished executions in the table (and 10,000
queued ones in a workflow of another team, so they block nothing measured)."""

from __future__ import annotations

from django.db import connection

from bench import database, fixtures, throughput
from bench.report import Report, ratio_row

GOAL = 0.90
QUEUED = 10_000

FINISHED_SQL = """
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, error,
        concurrency_key, priority, created_at, started_at, completed_at)
SELECT gen_random_uuid(), %(team_id)s, %(workflow_id)s, %(version_id)s,
       (ARRAY['completed', 'failed', 'cancelled', 'timed_out'])[1 + g %% 4], '{}', '{}', false,
       '', '', 0, now() - g * interval '1 second', now() - g * interval '1 second',
       now() - g * interval '1 second' + interval '1 second'
  FROM generate_series(1, %(rows)s) g
"""

QUEUED_SQL = """
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, error, blocked_by,
        concurrency_key, priority, created_at, queued_at)
SELECT gen_random_uuid(), %(team_id)s, %(workflow_id)s, %(version_id)s, 'queued', '{}', '{}',
       false, '', 'workflow', '', 0, now() - g * interval '1 millisecond',
       now() - g * interval '1 millisecond'
  FROM generate_series(1, %(rows)s) g
"""


def _load(sql: str, target: fixtures.Target, rows: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "team_id": target.team.id,
                "workflow_id": target.workflow.id,
                "version_id": target.workflow.current_version_id,
                "rows": rows,
            },
        )


def _clear_admitted(target: fixtures.Target) -> None:
    """Remove what the rounds admitted, keep the loaded rows; VACUUM so dead index entries of
    deleted rows do not slow the next round."""
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM executions_execution WHERE workflow_id = %s AND status IN "
            "('pending', 'queued')",
            [target.workflow.id],
        )
        cursor.execute("TRUNCATE django_q_ormq, executions_rejection")
        cursor.execute("VACUUM (ANALYZE) executions_execution")


def _rates(
    targets: list[fixtures.Target], *, clients: int, seconds: int, rounds: int
) -> list[float]:
    rates = []
    for _ in range(rounds):
        _clear_admitted(targets[0])
        rates.append(throughput.service(targets, clients=clients, seconds=seconds))
    return rates


def run(
    report: Report,
    *,
    hot: list[fixtures.Target],
    backlog: fixtures.Target,
    finished: int,
    clients: int,
    seconds: int,
    rounds: int,
) -> None:
    database.truncate_executions()
    empty = _rates(hot, clients=clients, seconds=seconds, rounds=rounds)
    _load(FINISHED_SQL, hot[0], finished)
    _load(QUEUED_SQL, backlog, QUEUED)
    full = _rates(hot, clients=clients, seconds=seconds, rounds=rounds)
    report.add(
        ratio_row(
            "4 growth",
            f"hot team, {clients} clients: {finished:,} finished + {QUEUED:,} queued vs empty",
            full,
            empty,
            "/s",
            GOAL,
        )
    )
    database.truncate_executions()
