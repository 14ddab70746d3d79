"""Figure 8, keys at scale (docs/performance.md, Keys at scale).

- The read of a fair promotion (workflow limit 1, per key 1) with 100,000 queued over 10 / 1,000
  / 10,000 keys and the finished rows of figure 4 (1,000,000 by default) over 10,000 keys:
  mantle_fair_heads (what promotion runs) against fair_queue_heads (what it ran before, the same
  answer), EXPLAIN ANALYZE, median of three.
- A drain: 10,000 keys x 10 queued, workflow limit 100, `max_parallel_per_key: 1`, no-op work
  (16 completers finish a pending execution each, its promotion after the commit, as a worker's
  completion does), against the same backlog unkeyed, in the same run: completions per second
  over the same window.
"""

from __future__ import annotations

import threading
import time

from django.db import connection, transaction

from bench import database, fixtures
from bench.keys import ago, insert_rows
from bench.report import Report, Row, median, ratio_row
from executions.models import Execution, Status
from executions.services.lifecycle import execution_finish
from executions.services.promotion import queue_promote
from executions.sql import queries
from teams.models import Team

SCALES = (10, 1_000, 10_000)
QUEUED = 100_000
GOAL_MS = 5.0
DRAIN_KEYS = 10_000
DRAIN_EACH = 10
DRAIN_LIMIT = 100
DRAIN_CLIENTS = 16
DRAIN_GOAL = 0.80

KEYED = (
    'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'
    "max_parallel_per_key: 1\n"
)


def _explained_ms(sql: str, params: dict[str, object]) -> float:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE) " + sql, params)
        plan = [row[0] for row in cursor.fetchall()]
    return float(plan[-1].split()[-2])  # "Execution Time: N ms"


def _read_costs(report: Report, *, fair: fixtures.Target, finished: int) -> None:
    database.truncate_executions()
    insert_rows(
        fair, status=Status.COMPLETED, rows=finished, keys=10_000, prefix="k", start=ago(days=30)
    )
    params: dict[str, object] = {
        "workflow_id": fair.workflow.id,
        "per_key": 1,
        "stored_key_limits": True,
        "limit": 1,
        "rate_per_key": False,
        "rate_max": 0,
        "rate_period": None,
    }
    costs: dict[int, tuple[float, float]] = {}
    for keys in SCALES:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM executions_execution WHERE status = 'queued'")
            cursor.execute("TRUNCATE executions_keyturn")
        insert_rows(
            fair, status=Status.QUEUED, rows=QUEUED, keys=keys, prefix="k", start=ago(hours=1)
        )
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE) executions_execution")
            cursor.execute("VACUUM (ANALYZE) executions_keyturn")
        before = median([_explained_ms(queries["fair_queue_heads"], params) for _ in range(3)])
        after = median([_explained_ms(queries["fair_heads"], params) for _ in range(3)])
        costs[keys] = (after, before)
        report.add(
            Row(
                "8 keys",
                f"keys at scale: fair promotion's read (limit 1, per key 1), {QUEUED:,} queued "
                f"over {keys:,} keys + {finished:,} finished: mantle_fair_heads vs "
                "fair_queue_heads (EXPLAIN ANALYZE, median of 3)",
                f"{after:.2f} ms",
                f"{before:.1f} ms",
                f"{after / before:.3f}",
                f"≤ {GOAL_MS:.0f} ms",
                "yes" if after <= GOAL_MS else "NO",
            )
        )
    smallest, largest = costs[SCALES[0]][0], costs[SCALES[-1]][0]
    report.add(
        Row(
            "8 keys",
            f"keys at scale: mantle_fair_heads at {SCALES[-1]:,} keys vs at {SCALES[0]} keys "
            "(flat: the same cost)",
            f"{largest:.2f} ms",
            f"{smallest:.2f} ms",
            f"{largest / smallest:.2f}",
            "flat",
            "",
        )
    )


def _drain_targets() -> tuple[fixtures.Target, fixtures.Target]:
    """The `bench-keyed` team's `drain-keyed` (limit 100, per key 1) and `drain-open` (limit
    100, unkeyed) workflows."""
    from workflows.services import workflow_apply

    team = Team.objects.get(slug="bench-keyed")
    names = set(team.workflows.values_list("name", flat=True))
    for name, keyed in (("drain-keyed", True), ("drain-open", False)):
        if name not in names:
            content = fixtures.workflow_yaml(name, DRAIN_LIMIT)
            if keyed:
                content = content.replace("steps:\n", KEYED + "steps:\n")
            workflow_apply(team=team, content=content)
    return fixtures.target(team, "drain-keyed"), fixtures.target(team, "drain-open")


def _complete_one(workflow_id: int) -> bool:
    """Finish one pending execution of the workflow (its promotion runs after the commit)."""
    with transaction.atomic():
        pending = (
            Execution.objects.select_for_update(skip_locked=True)
            .filter(workflow_id=workflow_id, status=Status.PENDING)
            .values_list("id", flat=True)
            .first()
        )
        if pending is None:
            return False
        execution_finish(pending, status=Status.COMPLETED)
    return True


def _drain_rate(target: fixtures.Target, *, keys: int, seconds: float) -> float:
    database.truncate_executions()
    insert_rows(
        target, status=Status.QUEUED, rows=keys * DRAIN_EACH, keys=keys, prefix="d", start=ago()
    )
    if keys == 1:
        with connection.cursor() as cursor:
            # Unkeyed: every execution has the key ''. Setting status again runs the trigger
            # that gives the key '' its turn; the turn of the key left empty is dropped by the
            # first promotion (mantle_fair_heads.sql).
            cursor.execute(
                "UPDATE executions_execution SET concurrency_key = '', status = status"
                " WHERE workflow_id = %s",
                [target.workflow.id],
            )
    with connection.cursor() as cursor:
        # Both tables as autovacuum would have them after a while: the keys' turns, written
        # by the queue's trigger just now, too (read costs above: the same).
        cursor.execute("VACUUM (ANALYZE) executions_execution")
        cursor.execute("VACUUM (ANALYZE) executions_keyturn")
    queue_promote(target.team.id, trigger="bench")
    done: list[int] = []
    deadline = time.monotonic() + seconds

    def completer() -> None:
        count = 0
        try:
            while time.monotonic() < deadline and _complete_one(target.workflow.id):
                count += 1
        finally:
            connection.close()
        done.append(count)

    started = time.monotonic()
    threads = [threading.Thread(target=completer) for _ in range(DRAIN_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / (time.monotonic() - started)


def _drain(report: Report, *, seconds: float, rounds: int) -> None:
    keyed, unkeyed = _drain_targets()
    ours: list[float] = []
    reference: list[float] = []
    for round_ in range(rounds):
        order = ("keyed", "unkeyed") if round_ % 2 else ("unkeyed", "keyed")
        for side in order:
            if side == "keyed":
                ours.append(_drain_rate(keyed, keys=DRAIN_KEYS, seconds=seconds))
            else:
                reference.append(_drain_rate(unkeyed, keys=1, seconds=seconds))
    database.truncate_executions()
    report.add(
        ratio_row(
            "8 keys",
            f"keys at scale: drain of {DRAIN_KEYS:,} keys x {DRAIN_EACH} queued, workflow limit "
            f"{DRAIN_LIMIT}, per key 1, no-op completions by {DRAIN_CLIENTS} clients, "
            f"{seconds:.0f} s windows (vs the same backlog unkeyed, same run)",
            ours,
            reference,
            "/s",
            DRAIN_GOAL,
        )
    )


def run(
    report: Report, *, fair: fixtures.Target, finished: int, seconds: float, rounds: int
) -> None:
    _read_costs(report, fair=fair, finished=finished)
    _drain(report, seconds=seconds, rounds=rounds)
