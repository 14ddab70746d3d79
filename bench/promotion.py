"""Figure 3: promotion latency (commit of a terminal state → the next queued execution is
`pending`) and dispatch latency (`pending` → `running` on an idle worker cluster), p50 and p99,
against the 30 s of a poller-only design.

Promotion is measured in-process: a finisher completes the slot holder of a workflow with
limit 1 and a queue behind it, and notes the time its commit returned; the promoted
execution's `promoted_at` is the database's clock on the same machine. Dispatch is measured with
a real cluster working through such a queue by itself: `started_at - promoted_at` of each
promoted execution (and `promoted_at - completed_at` of the one before, which includes the
commit)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from datetime import datetime

from django.db import transaction

from bench import database, fixtures, servers
from bench.report import Report, Row, percentile
from executions.models import TERMINAL, Execution, Status
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish

PROMOTION_GOAL_MS = 100.0
RUNNING_GOAL_MS = 500.0
POLLER_ONLY_MS = 30_000.0


def _row(name: str, samples: list[float], goal_ms: float) -> Row:
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    return Row(
        "3 latency",
        f"{name} ({len(samples)} samples)",
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms",
        f"{POLLER_ONLY_MS / 1000:.0f} s (poller only)",
        f"{p99 / POLLER_ONLY_MS:.4f}",
        f"p99 < {goal_ms:.0f} ms",
        "yes" if p99 < goal_ms else "NO",
    )


def _queue(target: fixtures.Target, count: int) -> None:
    for _ in range(count):
        execution_admit(team=target.team, workflow=target.workflow)


def promotion_in_process(
    target: fixtures.Target,
    samples: int,
    *,
    clear: Callable[[], None] = database.truncate_executions,
) -> list[float]:
    """Latencies of `samples` promotions of the workflow (limit 1), each after its holder's
    completion; `clear` empties the workflow before and after (figure 4 keeps its loaded rows)."""
    clear()
    _queue(target, samples + 1)
    latencies = []
    for _ in range(samples):
        holder = Execution.objects.get(workflow=target.workflow, status=Status.PENDING)
        committed: list[float] = []
        with transaction.atomic():
            # Registered before the terminal transition's own hook: runs first after commit.
            transaction.on_commit(lambda committed=committed: committed.append(time.time()))
            execution_finish(holder.id, status=Status.COMPLETED)
        promoted = Execution.objects.get(workflow=target.workflow, status=Status.PENDING)
        latencies.append((promoted.promoted_at.timestamp() - committed[0]) * 1000)
    clear()
    return latencies


def _ms(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds() * 1000


def on_cluster(target: fixtures.Target, samples: int, timeout: float) -> tuple[list[float], ...]:
    """(promotion, pending → running) latencies of a queue the cluster works through alone."""
    database.truncate_executions()
    with servers.cluster(workers=2):
        _wait_done(target, 1, timeout=60)  # warm-up: the cluster is up and idle
        database.truncate_executions()
        _queue(target, samples + 1)
        _wait_done(target, samples + 1, timeout=timeout)
    runs = list(Execution.objects.filter(workflow=target.workflow).order_by("created_at"))
    database.truncate_executions()
    promotion = [
        _ms(after.promoted_at, before.completed_at)
        for before, after in itertools.pairwise(runs)
        if after.promoted_at and before.completed_at
    ]
    running = [_ms(run.started_at, run.promoted_at) for run in runs if run.promoted_at]
    return promotion, running


def _wait_done(target: fixtures.Target, count: int, *, timeout: float) -> None:
    if not Execution.objects.filter(workflow=target.workflow).exists():
        _queue(target, count)
    deadline = time.monotonic() + timeout
    while Execution.objects.filter(workflow=target.workflow).exclude(status__in=TERMINAL).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not finish {count} executions in {timeout} s")
        time.sleep(0.1)


def run(report: Report, *, chain: fixtures.Target, samples: int, cluster: bool) -> None:
    report.add(
        _row(
            "promotion, in-process finisher",
            promotion_in_process(chain, samples),
            PROMOTION_GOAL_MS,
        )
    )
    if not cluster:
        return
    promotion, running = on_cluster(chain, samples, timeout=samples * 2 + 60)
    report.add(_row("promotion, on the worker cluster", promotion, PROMOTION_GOAL_MS))
    report.add(_row("pending → running, idle cluster", running, RUNNING_GOAL_MS))
