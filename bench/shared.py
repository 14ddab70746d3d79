"""Figure 9 (docs/performance.md): shared limits and rates.

- Admission into a workflow holding a named limit of 50 (`limits: [shared]`) with a rate limit of
  1,000 per second, 16 clients, while two threads complete slot holders (each completion frees a
  slot and promotes): a real shared pool, whose holders finish. The reference is figure 1's hot
  team, limited workflow (a workflow limit, reached) with the same two completers: both then
  admit into a limit that is reached and freed, so the ratio is what the named limit's lock and
  count and the rate window add, not the promotions every reached limit causes. Figure 1's open
  workflow (never reached, nothing to promote) with the same completers is a second row.
  Alternating rounds on emptied tables in the same run.
- Rate-promotion lateness: a burst queued behind `rate_limit: {max: 10, period: 1s}`, promoted
  by the real engine clock in a thread as the window slides; per promoted execution, the time
  from the moment the window admitted it (the promotion MAX before it leaving the window, or its
  own admission when later) to its `promoted_at`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import connections

from bench import database, fixtures, promotion, throughput
from bench.report import Report, Row, percentile, ratio_row
from engine import clock
from executions.models import Execution, Status
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from teams.models import Team
from teams.services import named_limit_set, team_create
from workflows.services import workflow_apply

NAMED_MAX = 50
RATE = 1_000
PACED_MAX, PACED_PERIOD = 10, timedelta(seconds=1)
BURST = 200
ADMISSION_GOAL = 0.70
LATENESS_GOAL_MS = 1_000.0

SHARED = f"limits: [shared]\nrate_limit: {{max: {RATE}, period: 1s}}\n"
PACED = f"rate_limit: {{max: {PACED_MAX}, period: 1s}}\n"


def _shared_targets() -> tuple[fixtures.Target, fixtures.Target]:
    """The `bench-shared` team's `shared` workflow (named limit + rate) and `paced` (rate)."""
    team = Team.objects.filter(slug="bench-shared").first()
    if team is None:
        team = team_create(slug="bench-shared", max_concurrent_executions=0)
        named_limit_set(team=team, name="shared", max=NAMED_MAX)
        for name, extra in (("shared", SHARED), ("paced", PACED)):
            content = fixtures.workflow_yaml(name, 0).replace("steps:\n", extra + "steps:\n")
            workflow_apply(team=team, content=content)
    return fixtures.target(team, "shared"), fixtures.target(team, "paced")


def _complete_holders(workflow_id: int, until: threading.Event) -> None:
    """Finish the oldest slot holder of the workflow (its commit promotes) until told to stop."""
    try:
        while not until.is_set():
            holder = (
                Execution.objects.filter(workflow_id=workflow_id, status=Status.PENDING)
                .order_by("created_at")
                .values_list("id", flat=True)
                .first()
            )
            if holder is None:
                until.wait(0.002)
            else:
                execution_finish(holder, status=Status.COMPLETED)
    finally:
        connections.close_all()


@contextmanager
def _completions(target: fixtures.Target) -> Iterator[None]:
    done = threading.Event()
    completers = [
        threading.Thread(target=_complete_holders, args=(target.workflow.id, done))
        for _ in range(2)
    ]
    for completer in completers:
        completer.start()
    try:
        yield
    finally:
        done.set()
        for completer in completers:
            completer.join()


def _admission(
    report: Report,
    *,
    references: dict[str, fixtures.Target],
    shared: fixtures.Target,
    clients: int,
    seconds: int,
    rounds: int,
) -> None:
    sides = {"shared": shared, **references}
    rates: dict[str, list[float]] = {side: [] for side in sides}
    for round_ in range(rounds):
        order = list(sides)[round_ % len(sides) :] + list(sides)[: round_ % len(sides)]
        for side in order:
            database.truncate_executions()
            with _completions(sides[side]):
                rates[side].append(
                    throughput.service([sides[side]], clients=clients, seconds=seconds)
                )
    for kind, goal in (("limited", ADMISSION_GOAL), ("open", 0.0)):
        report.add(
            ratio_row(
                "9 shared",
                f"admission, named limit {NAMED_MAX} + rate limit {RATE:,}/s, {clients} clients,"
                f" two threads completing holders (vs figure 1 hot team, {kind}, same completers,"
                " same run)",
                rates["shared"],
                rates[kind],
                "/s",
                goal,
            )
        )


def _with_clock(run: Callable[[], None]) -> None:
    stop = threading.Event()
    ticker = threading.Thread(target=clock.run_forever, args=(stop,), daemon=True)
    ticker.start()
    try:
        run()
    finally:
        stop.set()
        ticker.join(timeout=10)


def _lateness(report: Report, *, paced: fixtures.Target) -> None:
    database.truncate_executions()

    def burst_promoted() -> None:
        for _ in range(BURST):
            execution_admit(team=paced.team, workflow=paced.workflow)
        deadline = time.monotonic() + BURST / PACED_MAX + 30
        while Execution.objects.filter(status=Status.QUEUED).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the burst of {BURST} was not promoted in time")
            time.sleep(0.1)

    _with_clock(burst_promoted)
    rows = list(
        Execution.objects.filter(workflow=paced.workflow)
        .order_by("pending_at")
        .values_list("created_at", "pending_at", "promoted_at")
    )
    database.truncate_executions()
    late_ms = [
        (promoted - max(created, rows[n - PACED_MAX][1] + PACED_PERIOD)).total_seconds() * 1000
        for n, (created, _, promoted) in enumerate(rows)
        if promoted is not None
    ]
    p50, p99 = percentile(late_ms, 50), percentile(late_ms, 99)
    report.add(
        Row(
            "9 shared",
            f"rate promotion lateness, a burst of {BURST} behind rate_limit {PACED_MAX}/1s, real "
            f"engine clock ({len(late_ms)} promoted; from the moment the window admitted each)",
            f"p50 {p50:.0f} ms, p99 {p99:.0f} ms",
            f"{promotion.POLLER_ONLY_MS / 1000:.0f} s (poller only)",
            f"{p99 / promotion.POLLER_ONLY_MS:.4f}",
            f"p99 < {LATENESS_GOAL_MS:.0f} ms",
            "yes" if p99 < LATENESS_GOAL_MS else "NO",
        )
    )


def run(
    report: Report,
    *,
    references: dict[str, fixtures.Target],
    clients: int,
    seconds: int,
    rounds: int,
) -> None:
    """`references`: figure 1's hot team, `limited` and `open` workflows."""
    shared, paced = _shared_targets()
    _admission(
        report,
        references=references,
        shared=shared,
        clients=clients,
        seconds=seconds,
        rounds=rounds,
    )
    _lateness(report, paced=paced)
