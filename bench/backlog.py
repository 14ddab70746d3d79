"""Figure 13, backlog: what a step claim costs as one team's backlog grows (docs/performance.md,
Claims). One team's running execution with 100, 10,000 and 100,000 pending branches, another
team's one pending step beside it; a claim of 100 steps (`steps_claim`, as a worker with 100
free slots runs it) timed ROUNDS times per size in this process, each rolled back so the
backlog stays as it was. The reference is the smallest backlog that fills the claim (100).
The same for the limit-aware claim (`steps_claim_limited`, docs/performance.md, Step-scope
hand-off): as many branches waiting for a global limit with one unit free, another team's one
beside them, a hand-off's claim with 100 free slots (it takes one step)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from django.db import connection, transaction

from bench import capacity, database
from bench.report import Report, Row
from engine import dispatch
from executions.models import Execution
from executions.services.admission import execution_admit
from teams.services import named_limit_set

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


_WAITING = """
INSERT INTO executions_stepexecution (execution_id, team_id, name, fanout_index, status,
                                      attempt, error, lease_owner, rate_key, rate_units,
                                      limit_ids, limit_units)
SELECT e.id, e.team_id, 'branch', n, 'waiting', 1, '', '', '', 0, ARRAY[%(limit)s], ARRAY[1]
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


def _claim_ms(claim: Callable[[str, int], list[dispatch.Claim]], takes: int) -> float:
    """Median ms of a claim with LIMIT free slots, each rolled back (after one not timed); it
    must take `takes` steps."""
    times = []
    for _ in range(ROUNDS + 1):
        with transaction.atomic():
            began = time.perf_counter()
            claimed = claim("bench-backlog", LIMIT)
            times.append((time.perf_counter() - began) * 1000)
            transaction.set_rollback(True)
        if len(claimed) != takes:
            raise RuntimeError(f"the claim took {len(claimed)} steps, not {takes}")
    return statistics.median(times[1:])


def _timings(rows: str, claim: Callable[[], float], **params: object) -> dict[int, float]:
    """The claim's median ms per backlog size, the backlog's steps inserted by `rows`: one for
    another team, then the flood's."""
    database.truncate_executions()
    try:
        flood = _running("backlog-flood")
        other = _running("backlog-other")
        with connection.cursor() as cursor:
            cursor.execute(rows, {"execution": other.id, "first": 0, "last": 0, **params})
        timings: dict[int, float] = {}
        created = 0
        for size in SIZES:
            if size > created:
                with connection.cursor() as cursor:
                    cursor.execute(
                        rows,
                        {"execution": flood.id, "first": created, "last": size - 1, **params},
                    )
                    # Hint bits and statistics as a table that has lived would have them.
                    cursor.execute("VACUUM ANALYZE executions_stepexecution")
                created = size
            timings[size] = claim()
    finally:
        database.truncate_executions()
    return timings


def run(report: Report) -> None:
    pending = _timings(_BRANCHES, lambda: _claim_ms(dispatch.steps_claim, LIMIT))
    limit, _ = named_limit_set(team=None, name="bench-backlog", max=1)
    waiting = _timings(_WAITING, lambda: _claim_ms(dispatch.steps_claim_limited, 1), limit=limit.id)
    for timings, what in (
        (pending, f"a claim of {LIMIT} steps with {{size:,}} pending steps of one team beside"),
        (
            waiting,
            f"a limit-aware claim with {LIMIT} free slots (one unit free: it takes one) with"
            " {size:,} waiting steps of one team beside",
        ),
    ):
        reference = timings[SIZES[0]]
        for size in SIZES[1:]:
            ratio = reference / timings[size]
            report.add(
                Row(
                    "13 backlog",
                    what.format(size=size) + f" another team's one (median of {ROUNDS})",
                    f"{timings[size]:.1f} ms",
                    f"{reference:.1f} ms with {SIZES[0]}",
                    f"{ratio:.2f}",
                    f"≥ {GOAL:.2f}",
                    "yes" if ratio >= GOAL else "NO",
                )
            )
