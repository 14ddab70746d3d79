"""Figure 13, backlog: what a step claim costs as one team's backlog grows (docs/performance.md,
Claims). One team's running execution with 100, 10,000 and 100,000 pending branches, another
team's one pending step beside it; a claim of 100 steps (`steps_claim`, as a worker with 100
free slots runs it) timed ROUNDS times per size in this process, each rolled back so the
backlog stays as it was. The reference is the smallest backlog that fills the claim (100)."""

from __future__ import annotations

import statistics
import time

from django.db import connection, transaction

from bench import capacity, database
from bench.report import Report, Row
from engine import dispatch
from executions.models import Execution
from executions.services.admission import execution_admit

LIMIT = 100

SIZES = (LIMIT, 10_000, 100_000)
ROUNDS = 20
GOAL = 0.8  # the claim at 100,000 pending at least this fast, relative to the empty one

_BRANCHES = """
INSERT INTO executions_stepexecution (execution_id, team_id, name, fanout_index, status,
                                      attempt, error, lease_owner, rate_key, rate_units)
SELECT e.id, e.team_id, 'branch', n, 'pending', 1, '', '', '', 0
  FROM executions_execution e, generate_series(%(first)s, %(last)s) AS n
 WHERE e.id = %(execution)s
"""


def _running(name: str) -> Execution:
    """A running execution of the team `capacity.TEAM`'s workflow `name` (nothing runs it: no
    serve is up), with no steps."""
    definition = capacity.workflow(name, capacity.NOOP)
    execution = execution_admit(team=definition.team, workflow=definition).execution
    Execution.objects.filter(id=execution.id).update(status="running")
    return execution


def _claim_ms() -> float:
    """Median ms of a claim of LIMIT steps, each rolled back (after one not timed)."""
    times = []
    for _ in range(ROUNDS + 1):
        with transaction.atomic():
            began = time.perf_counter()
            claimed = dispatch.steps_claim("bench-backlog", LIMIT)
            times.append((time.perf_counter() - began) * 1000)
            transaction.set_rollback(True)
        if len(claimed) < LIMIT:
            raise RuntimeError(f"the claim took {len(claimed)} steps, not {LIMIT}")
    return statistics.median(times[1:])


def run(report: Report) -> None:
    database.truncate_executions()
    try:
        flood = _running("backlog-flood")
        other = _running("backlog-other")
        with connection.cursor() as cursor:
            cursor.execute(_BRANCHES, {"execution": other.id, "first": 0, "last": 0})
        timings: dict[int, float] = {}
        created = 0
        for size in SIZES:
            if size > created:
                with connection.cursor() as cursor:
                    cursor.execute(
                        _BRANCHES, {"execution": flood.id, "first": created, "last": size - 1}
                    )
                    # Hint bits and statistics as a table that has lived would have them.
                    cursor.execute("VACUUM ANALYZE executions_stepexecution")
                created = size
            timings[size] = _claim_ms()
    finally:
        database.truncate_executions()
    reference = timings[SIZES[0]]
    for size in SIZES[1:]:
        ratio = reference / timings[size]
        report.add(
            Row(
                "13 backlog",
                f"a claim of {LIMIT} steps with {size:,} pending steps of one team beside"
                f" another team's one (median of {ROUNDS})",
                f"{timings[size]:.1f} ms",
                f"{reference:.1f} ms with {SIZES[0]} pending",
                f"{ratio:.2f}",
                f"≥ {GOAL:.2f}",
                "yes" if ratio >= GOAL else "NO",
            )
        )
