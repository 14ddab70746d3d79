"""Figure 4: admission throughput and promotion latency with 0 and with N finished executions in
the table (and 10,000 queued ones in a workflow of another team, so they block nothing
measured). The finished rows are the hot team's, half in its open workflow (the one admitted
into) and half in its chain workflow (limit 1, the one whose promotions are timed)."""

from __future__ import annotations

import time

from django.db import connection, transaction

from bench import database, fixtures, promotion, throughput
from bench.report import Report, Row, percentile, ratio_row

GOAL = 0.90
PROMOTION_GOAL = 1.25  # promotion p99 with the finished rows over the p99 without: unchanged
QUEUED = 10_000

FINISHED_SQL = """
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, error,
        concurrency_key, priority, created_at, started_at, completed_at)
SELECT gen_random_uuid(), %(team_id)s,
       CASE WHEN g %% 2 = 0 THEN %(workflow_id)s ELSE %(other_workflow_id)s END,
       CASE WHEN g %% 2 = 0 THEN %(version_id)s ELSE %(other_version_id)s END,
       (ARRAY['completed', 'failed', 'cancelled', 'timed_out'])[1 + g %% 4], '{}', '{}', false,
       '', '', 0, now() - g * interval '1 second', now() - g * interval '1 second',
       now() - g * interval '1 second' + interval '1 second'
  FROM generate_series(1, %(rows)s) g
"""

# Oldest first: the queued trigger (mantle_queued_turn.sql) then moves the key's turn once, where
# newest first moved it for every row, each update walking the row's versions of this statement.
QUEUED_SQL = """
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, error, blocked_by,
        concurrency_key, priority, created_at, queued_at)
SELECT gen_random_uuid(), %(team_id)s, %(workflow_id)s, %(version_id)s, 'queued', '{}', '{}',
       false, '', 'workflow', '', 0, now() - g * interval '1 millisecond',
       now() - g * interval '1 millisecond'
  FROM generate_series(%(rows)s, 1, -1) g
"""

# The table's indexes but its constraints', and its primary key with the foreign keys that
# reference it: dropped before the load and built again after it.
_INDEXES = """
SELECT indexname, indexdef FROM pg_indexes i
 WHERE tablename = 'executions_execution'
   AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)
"""
_KEYS = """
SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
 WHERE confrelid = 'executions_execution'::regclass
    OR (conrelid = 'executions_execution'::regclass AND contype = 'p')
 ORDER BY contype = 'f'
"""


def _load_finished(
    target: fixtures.Target, other: fixtures.Target, rows: int, *, bulk: bool
) -> None:
    """`rows` finished executions, as fast as PostgreSQL takes them: with `bulk`, in one
    transaction that drops the table's indexes, primary key and the foreign keys on it, inserts
    with the foreign-key triggers off (session_replication_role: the ids are the fleet's own),
    then builds the indexes and keys again, each in one sorted pass (as a restore does) where
    row-by-row upkeep of 24 indexes took 2.7 times as long. Nothing else uses the table then."""
    values = {
        "team_id": target.team.id,
        "workflow_id": target.workflow.id,
        "version_id": target.workflow.current_version_id,
        "other_workflow_id": other.workflow.id,
        "other_version_id": other.workflow.current_version_id,
        "rows": rows,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        if not bulk:
            cursor.execute(FINISHED_SQL, values)
            return
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
        cursor.execute(_INDEXES)
        indexes = cursor.fetchall()
        cursor.execute(_KEYS)
        keys = cursor.fetchall()
        for table, name, _ in reversed(keys):  # the foreign keys first, then the primary key
            cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute(FINISHED_SQL, values)
        for table, name, definition in keys:
            cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
        for _, definition in indexes:
            cursor.execute(definition)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) executions_execution")


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


def _rates(
    targets: list[fixtures.Target], *, clients: int, seconds: int, rounds: int
) -> list[float]:
    rates = []
    for _ in range(rounds):
        fixtures.clear_admitted(targets[0])
        rates.append(throughput.service(targets, clients=clients, seconds=seconds))
    return rates


def _promotions(chain: fixtures.Target, samples: int) -> list[float]:
    """Promotion latencies of the chain workflow (bench.promotion), its finished rows kept."""
    return promotion.promotion_in_process(
        chain, samples, clear=lambda: fixtures.clear_admitted(chain)
    )


def run(
    report: Report,
    *,
    hot: list[fixtures.Target],
    backlog: fixtures.Target,
    finished: int,
    clients: int,
    seconds: int,
    rounds: int,
    samples: int,
) -> None:
    database.truncate_executions()
    chain = fixtures.target(hot[0].team, "chain")
    empty = _rates(hot, clients=clients, seconds=seconds, rounds=rounds)
    promoted_empty = _promotions(chain, samples)
    began = time.monotonic()
    _load_finished(hot[0], chain, finished, bulk=finished >= 1_000_000)
    print(f"  figure 4: {finished:,} finished rows loaded in {time.monotonic() - began:.0f} s")
    _load(QUEUED_SQL, backlog, QUEUED)
    full = _rates(hot, clients=clients, seconds=seconds, rounds=rounds)
    promoted_full = _promotions(chain, samples)
    grown = f"{finished:,} finished + {QUEUED:,} queued"
    report.add(
        ratio_row(
            "4 growth", f"hot team, {clients} clients: {grown} vs empty", full, empty, "/s", GOAL
        )
    )
    p99_full, p99_empty = percentile(promoted_full, 99), percentile(promoted_empty, 99)
    ratio = p99_full / p99_empty
    report.add(
        Row(
            "4 growth",
            f"promotion p99, in-process finisher, workflow limit 1 ({samples} samples):"
            f" {grown} vs empty",
            f"p50 {percentile(promoted_full, 50):.1f} ms, p99 {p99_full:.1f} ms",
            f"p50 {percentile(promoted_empty, 50):.1f} ms, p99 {p99_empty:.1f} ms",
            f"{ratio:.2f}",
            f"≤ {PROMOTION_GOAL:.2f}",
            "yes" if ratio <= PROMOTION_GOAL else "NO",
        )
    )
    database.truncate_executions()
