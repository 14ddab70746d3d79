"""Figure 8 (docs/performance.md): per-key limits.

- Admission into a keyed workflow (`max_parallel_per_key: 1`, a random key of 10,000 per
  admission, 16 clients) against the unkeyed open workflow of figure 1's hot team, alternating
  rounds on emptied tables in the same run.
- Fairness: a workflow limit of 1, one key with 10,000 queued and nine keys with one each queued
  after it; the promotion at which the last of the nine is promoted, against promotion by age
  (where they come after the whole backlog).
- The reads of a promotion and an admission with 100,000 queued over 10,000 keys and 1,000,000
  finished rows of the same workflow: fair_queue_heads and a key's holder count, EXPLAIN ANALYZE.
"""

from __future__ import annotations

import random
import time
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from bench import database, fixtures, throughput
from bench.report import Report, Row, median, ratio_row
from executions.models import Status
from executions.services.lifecycle import execution_finish
from executions.sql import queries
from teams.models import Team
from teams.services import team_create
from workflows.services import workflow_apply

KEYS = 10_000
BACKLOG = 10_000
SINGLES = 9
PLAN_QUEUED = 100_000
GOAL = 0.80

KEYED = (
    'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'
    "max_parallel_per_key: 1\n"
)

# Rows of the keyed workflow: `status` over `keys` keys, `rows` of them, one second apart (the
# oldest first), promoted ones with a promoted_at.
ROWS_SQL = """
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, error, blocked_by,
        concurrency_key, priority, created_at, queued_at, promoted_at, completed_at)
SELECT gen_random_uuid(), %(team_id)s, %(workflow_id)s, %(version_id)s, %(status)s, '{}', '{}',
       false, '', CASE WHEN %(status)s = 'queued' THEN 'workflow' END,
       %(prefix)s || (g %% %(keys)s), 0,
       %(start)s + g * interval '1 millisecond',
       CASE WHEN %(status)s = 'queued' THEN %(start)s + g * interval '1 millisecond' END,
       CASE WHEN %(status)s = 'completed' THEN %(start)s + g * interval '1 millisecond' END,
       CASE WHEN %(status)s = 'completed' THEN %(start)s + g * interval '1 millisecond' END
  FROM generate_series(1, %(rows)s) g
"""


def ago(**delta: float) -> datetime:
    return timezone.now() - timedelta(**delta)


def _keyed_targets() -> tuple[fixtures.Target, fixtures.Target]:
    """The `bench-keyed` team's `keyed` workflow (no workflow limit) and `fair` (limit 1)."""
    team = Team.objects.filter(slug="bench-keyed").first()
    if team is None:
        team = team_create(slug="bench-keyed", max_concurrent_executions=0)
        for name, limit in (("keyed", 0), ("fair", 1)):
            content = fixtures.workflow_yaml(name, limit).replace("steps:\n", KEYED + "steps:\n")
            workflow_apply(team=team, content=content)
    return fixtures.target(team, "keyed"), fixtures.target(team, "fair")


def insert_rows(
    target: fixtures.Target, *, status: str, rows: int, keys: int, prefix: str, start: datetime
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            ROWS_SQL,
            {
                "team_id": target.team.id,
                "workflow_id": target.workflow.id,
                "version_id": target.workflow.current_version_id,
                "status": status,
                "rows": rows,
                "keys": keys,
                "prefix": prefix,
                "start": start,
            },
        )


def fair_target() -> fixtures.Target:
    return _keyed_targets()[1]


def _admission(
    report: Report,
    *,
    hot: fixtures.Target,
    keyed: fixtures.Target,
    clients: int,
    seconds: int,
    rounds: int,
) -> None:
    def customer(rng: random.Random) -> dict[str, object]:
        return {"customer": f"k{rng.randrange(KEYS)}"}

    ours: list[float] = []
    unkeyed: list[float] = []
    for round_ in range(rounds):
        order = ("keyed", "unkeyed") if round_ % 2 else ("unkeyed", "keyed")
        for side in order:
            database.truncate_executions()
            if side == "keyed":
                ours.append(
                    throughput.service([keyed], clients=clients, seconds=seconds, inputs=customer)
                )
            else:
                unkeyed.append(throughput.service([hot], clients=clients, seconds=seconds))
    report.add(
        ratio_row(
            "8 keys",
            f"admission, {KEYS:,} keys (max_parallel_per_key 1), {clients} clients "
            f"(vs figure 1 hot team, open, unkeyed, same run)",
            ours,
            unkeyed,
            "/s",
            GOAL,
        )
    )


def _fairness(report: Report, *, fair: fixtures.Target) -> None:
    database.truncate_executions()
    insert_rows(fair, status=Status.PENDING, rows=1, keys=1, prefix="big", start=ago(hours=2))
    insert_rows(fair, status=Status.QUEUED, rows=BACKLOG, keys=1, prefix="big", start=ago(hours=1))
    insert_rows(
        fair, status=Status.QUEUED, rows=SINGLES, keys=SINGLES, prefix="single-", start=ago()
    )
    singles: list[int] = []
    took: list[float] = []
    with connection.cursor() as cursor:
        for promotion in range(1, SINGLES + 2):
            cursor.execute(
                "SELECT id FROM executions_execution WHERE workflow_id = %s AND status = 'pending'",
                [fair.workflow.id],
            )
            (holder,) = cursor.fetchone()
            started = time.perf_counter()
            execution_finish(holder, status=Status.COMPLETED)  # promotes after its commit
            took.append(time.perf_counter() - started)
            cursor.execute(
                "SELECT concurrency_key FROM executions_execution"
                " WHERE workflow_id = %s AND status = 'pending'",
                [fair.workflow.id],
            )
            if cursor.fetchone()[0].startswith("single-"):
                singles.append(promotion)
            if len(singles) == SINGLES:
                break
    by_age = BACKLOG + SINGLES  # promoted by age, the last single waits for the whole backlog
    report.add(
        Row(
            "8 keys",
            f"fairness: the last of {SINGLES} single-execution keys behind a {BACKLOG:,} backlog "
            f"of one key, workflow limit 1 (vs promotion by age); a completion + its promotion "
            f"took {median(took) * 1000:.1f} ms (median)",
            f"promotion {max(singles)}",
            f"promotion {by_age:,}",
            f"{max(singles) / by_age:.4f}",
            "≤ 10 promotions",
            "yes" if max(singles) <= SINGLES + 1 else "NO",
        )
    )


def _plans(report: Report, *, fair: fixtures.Target, finished: int) -> None:
    database.truncate_executions()
    insert_rows(
        fair, status=Status.COMPLETED, rows=finished, keys=KEYS, prefix="k", start=ago(days=30)
    )
    insert_rows(
        fair, status=Status.QUEUED, rows=PLAN_QUEUED, keys=KEYS, prefix="k", start=ago(hours=1)
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) executions_execution")
        reads = {
            "fair_queue_heads (limit 1, per key 1)": (
                queries["fair_queue_heads"],
                {
                    "workflow_id": fair.workflow.id,
                    "per_key": 1,
                    "stored_key_limits": True,
                    "limit": 1,
                    "rate_per_key": False,
                    "rate_max": 0,
                    "rate_period": None,
                },
            ),
            "a key's holder count": (
                "SELECT count(*) FROM executions_execution e"
                " WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = %(concurrency_key)s"
                " AND e.status IN ('pending', 'running')",
                {"workflow_id": fair.workflow.id, "concurrency_key": "k42"},
            ),
        }
        for name, (sql, params) in reads.items():
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            plan = [row[0] for row in cursor.fetchall()]
            ms = float(plan[-1].split()[-2])  # "Execution Time: N ms"
            print("\n".join(plan), flush=True)
            report.add(
                Row(
                    "8 keys",
                    f"{name}, {PLAN_QUEUED:,} queued over {KEYS:,} keys + {finished:,} finished "
                    "(EXPLAIN ANALYZE)",
                    f"{ms:.2f} ms",
                    "",
                    "",
                )
            )
    database.truncate_executions()


def run(
    report: Report, *, hot: fixtures.Target, clients: int, seconds: int, rounds: int, finished: int
) -> None:
    keyed, fair = _keyed_targets()
    _admission(report, hot=hot, keyed=keyed, clients=clients, seconds=seconds, rounds=rounds)
    _fairness(report, fair=fair)
    _plans(report, fair=fair, finished=finished)
