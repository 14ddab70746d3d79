"""Figure 11: operating the queues (docs/operations.md), each part measured against a reference
taken in the same run:

- pruning under load: `finished` executions (one step each) past their horizon pruned by the
  retention pass while figure 1's hot team admits at 16 clients: admission rate and p99 vs the
  same admission without pruning (PRUNE_WINDOW seconds each), rows pruned per second, and the
  two tables' size before the pass, after it and after a VACUUM;
- pause: a flood of admissions, the workflow paused mid-flood: executions that became pending
  after the pause's commit (every row checked), and resume → first promotion p99 over cycles;
- bulk replay: `replays` failed executions replayed by one bulk action under a workflow limit of
  20 on a real `mantle serve`: the most slot holders seen in any sample, and completions per
  second vs the same number started fresh;
- delayed runs: `delayed` runs scheduled for the same second, admitted by the engine clock
  through a workflow limit of 20: lateness p99 (admission time - run_at);
- the database over a simulated day (`day_sizes`): the execution and step tables' size after
  24 hours of traffic, pruned hourly with short horizons, vs never pruned.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, connections
from django.utils import timezone

from bench import capacity, database, fixtures
from bench import ops_load as load
from bench.engine import _on_mantle
from bench.measure import Measure
from bench.report import Report, Row, median, percentile
from engine import clock
from executions.models import BulkAction, BulkStatus, Execution, Status
from executions.services import bulk, retention
from executions.services.admission import execution_admit
from executions.services.pauses import workflow_pause_set

LIMIT = 20
PRUNE_RATE_GOAL, PRUNE_P99_GOAL = 0.8, 2.0
RESUME_GOAL_MS = 50.0
REPLAY_GOAL = 0.9
LATENESS_GOAL_S = 1.0
# Seconds of admissions measured with and without the pruning pass.
PRUNE_WINDOW = 10.0


@dataclass(frozen=True)
class Sizes:
    finished: int = 1_000_000
    replays: int = 10_000
    delayed: int = 10_000
    day_per_hour: int = 5_000


SCHEDULED_SQL = """
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, error,
        concurrency_key, priority, created_at, run_at)
SELECT gen_random_uuid(), %(team_id)s, %(workflow_id)s, %(version_id)s, 'scheduled', '{}', '{}',
       false, '', '', 0, now(), %(run_at)s
  FROM generate_series(1, %(rows)s) g
"""


def pruning_under_load(results: Report, *, hot: list[fixtures.Target], finished: int) -> None:
    database.truncate_executions()
    old = timezone.now() - timedelta(days=400)
    load.finished_rows(hot[0], finished, at=old)
    fixtures.clear_admitted(*hot)
    rate_alone, latency_alone = load.admissions(hot, PRUNE_WINDOW)
    fixtures.clear_admitted(*hot)
    size_before = load.tables_mb()
    pruned: dict[str, float] = {}

    def prune() -> None:
        began = time.perf_counter()
        try:
            deleted = retention.prune()
            pruned["rows"] = sum(deleted.values())
            pruned["seconds"] = time.perf_counter() - began
        finally:
            connections.close_all()

    pruner = threading.Thread(target=prune)
    pruner.start()
    rate, latency = load.admissions(hot, PRUNE_WINDOW)
    overlapped = pruner.is_alive()
    pruner.join()
    fixtures.clear_admitted(*hot)  # and VACUUM
    size_pruned = load.tables_mb()
    label = (
        f"{finished:,} finished (+1 step each) pruned while the hot team admits, "
        f"{load.CLIENTS} clients"
    )
    results.add(
        Row(
            "11",
            f"{label}: admissions/s vs without pruning",
            f"{rate:,.0f}/s",
            f"{rate_alone:,.0f}/s",
            f"{rate / rate_alone:.2f}",
            f">= {PRUNE_RATE_GOAL}",
            "yes" if rate / rate_alone >= PRUNE_RATE_GOAL else "no",
        )
    )
    p99, p99_alone = percentile(latency, 99), percentile(latency_alone, 99)
    results.add(
        Row(
            "11",
            "admission p99 while pruning vs without",
            f"{p99:.1f} ms",
            f"{p99_alone:.1f} ms",
            f"{p99 / p99_alone:.2f}",
            f"<= {PRUNE_P99_GOAL}",
            "yes" if p99 / p99_alone <= PRUNE_P99_GOAL else "no",
        )
    )
    note = "" if overlapped else " (the pass ended before the admissions did)"
    results.add(
        Row(
            "11",
            f"rows pruned per second (executions + steps){note}",
            f"{pruned['rows'] / pruned['seconds']:,.0f} rows/s",
            f"{pruned['rows']:,.0f} rows in {pruned['seconds']:.1f} s",
            "",
        )
    )
    results.add(
        Row(
            "11",
            "execution + step tables with their indexes: after the pass and a VACUUM vs before",
            f"{size_pruned:,.1f} MB",
            f"{size_before:,.1f} MB",
            f"{size_pruned / size_before:.2f}",
        )
    )
    database.truncate_executions()


def pause_takes_effect(results: Report, *, target: fixtures.Target, cycles: int = 30) -> None:
    database.truncate_executions()
    workflow = target.workflow
    paused_at: list[object] = []

    def pause_midway() -> None:
        time.sleep(1.0)
        paused_at.append(workflow_pause_set(workflow=workflow, paused=True).paused_at)
        connections.close_all()

    pauser = threading.Thread(target=pause_midway)
    pauser.start()
    load.admissions([target], 2.0)
    pauser.join()
    late = Execution.objects.filter(workflow=workflow, pending_at__gt=paused_at[0]).count()
    held = Execution.objects.filter(workflow=workflow, blocked_by="paused").count()
    workflow_pause_set(workflow=workflow, paused=False)
    delays = []
    for _ in range(cycles):
        workflow_pause_set(workflow=workflow, paused=True)
        for _ in range(3):
            execution_admit(team=target.team, workflow=workflow)
        with connection.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            (before,) = cursor.fetchone()
        workflow_pause_set(workflow=workflow, paused=False)
        first = (
            Execution.objects.filter(workflow=workflow, promoted_at__gt=before)
            .order_by("promoted_at")
            .values_list("promoted_at", flat=True)
            .first()
        )
        if first is not None:
            delays.append((first - before).total_seconds() * 1000)
    results.add(
        Row(
            "11",
            f"pause mid-flood ({load.CLIENTS} clients): pending after the pause's commit "
            "(every row)",
            f"{late}",
            f"{held} held by the pause",
            "",
            "0",
            "yes" if late == 0 else "no",
        )
    )
    p99 = percentile(delays, 99)
    results.add(
        Row(
            "11",
            f"resume → first promotion, {len(delays)} cycles (p99)",
            f"{p99:.1f} ms",
            f"p50 {median(delays):.1f} ms",
            "",
            f"< {RESUME_GOAL_MS:g} ms",
            "yes" if p99 < RESUME_GOAL_MS else "no",
        )
    )
    database.truncate_executions()


def _holders_sampler(workflow_id: int, most: list[int], stop: threading.Event) -> None:
    try:
        while not stop.is_set():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM executions_execution WHERE workflow_id = %s "
                    "AND status IN ('pending', 'running')",
                    [workflow_id],
                )
                most[0] = max(most[0], cursor.fetchone()[0])
            stop.wait(0.01)
    finally:
        connections.close_all()


def bulk_replay(results: Report, *, replays: int) -> None:
    limited = capacity.workflow("bulk-replay", f"max_parallel_executions: {LIMIT}\n{capacity.NOOP}")
    fresh = _on_mantle("fresh", lambda base: capacity.through_service(limited, replays))
    most = [0]

    def replayed(base: str) -> Measure:
        target = fixtures.Target(team=limited.team, workflow=limited)
        load.finished_rows(target, replays, at=timezone.now(), status=Status.FAILED, steps=0)
        stop = threading.Event()
        sampler = threading.Thread(target=_holders_sampler, args=(limited.id, most, stop))
        sampler.start()
        began = time.perf_counter()
        made = bulk.bulk_create(
            team=limited.team,
            action=bulk.REPLAY,
            where=bulk.BulkFilter(workflow=limited, status=Status.FAILED),
            limit=replays,
        )
        done = 0
        while time.perf_counter() - began < capacity.DEADLINE:
            done = Execution.objects.filter(
                replay_of__isnull=False, status=Status.COMPLETED
            ).count()
            if done >= replays:
                break
            time.sleep(0.2)
        seconds = time.perf_counter() - began
        stop.set()
        sampler.join()
        finished = BulkAction.objects.get(id=made.id).status == BulkStatus.COMPLETED
        return Measure(count=replays, seconds=seconds, done=done if finished else 0)

    replay = _on_mantle("bulk replay", replayed)
    ratio = replay.rate / fresh.rate if fresh.rate else float("nan")
    results.add(
        Row(
            "11",
            f"bulk replay of {replays:,} failed, workflow limit {LIMIT}: completions/s vs fresh",
            f"{replay.rate:.1f}/s",
            f"{fresh.rate:.1f}/s",
            f"{ratio:.2f}",
            f">= {REPLAY_GOAL}",
            "yes" if ratio >= REPLAY_GOAL and replay.finished else "no",
        )
    )
    results.add(
        Row(
            "11",
            "bulk replay: most slot holders in any sample (every 10 ms)",
            f"{most[0]}",
            f"limit {LIMIT}",
            "",
            f"<= {LIMIT}",
            "yes" if most[0] <= LIMIT else "no",
        )
    )


def delayed_runs(results: Report, *, target: fixtures.Target, delayed: int) -> None:
    database.truncate_executions()
    run_at = timezone.now() + timedelta(seconds=3)
    with connection.cursor() as cursor:
        cursor.execute(
            SCHEDULED_SQL,
            {
                "team_id": target.team.id,
                "workflow_id": target.workflow.id,
                "version_id": target.workflow.current_version_id,
                "run_at": run_at,
                "rows": delayed,
            },
        )
    stop = threading.Event()
    ticker = threading.Thread(target=lambda: (clock.run_forever(stop), connections.close_all()))
    ticker.start()
    deadline = time.monotonic() + 120
    while Execution.objects.filter(status=Status.SCHEDULED).exists():
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    stop.set()
    ticker.join()
    admitted = Execution.objects.filter(workflow=target.workflow, run_at=run_at)
    lateness = [
        (created - run_at).total_seconds()
        for created in admitted.values_list("created_at", flat=True)
    ]
    p99 = percentile(lateness, 99)
    results.add(
        Row(
            "11",
            f"{delayed:,} delayed runs due the same second, workflow limit {LIMIT}: lateness p99",
            f"{p99:.2f} s",
            f"p50 {median(lateness):.2f} s, {len(lateness):,} admitted",
            "",
            f"< {LATENESS_GOAL_S:g} s",
            "yes" if p99 < LATENESS_GOAL_S and len(lateness) == delayed else "no",
        )
    )
    database.truncate_executions()


def day_sizes(results: Report, *, per_hour: int) -> None:
    """24 simulated hours of `per_hour` executions (9 in 10 completed, 3 steps each), ending now;
    one workflow pruned after every hour with horizons of 6 h (completed) and 12 h (failed) and
    VACUUMed as autovacuum would, the other kept for ever: the tables' sizes at the end."""
    sizes = {}
    for name, horizons in (("day-pruned", "{completed: 6h, failed: 12h}"), ("day-kept", "0")):
        database.truncate_executions()
        retained = horizons if horizons != "0" else "{completed: 0, failed: 0}"
        workflow = capacity.workflow(name, f"retention: {retained}\n{capacity.NOOP}")
        target = fixtures.Target(team=workflow.team, workflow=workflow)
        start = timezone.now() - timedelta(hours=24)
        for hour in range(24):
            at = start + timedelta(hours=hour)
            load.finished_rows(target, per_hour * 9 // 10, at=at, steps=3)
            load.finished_rows(target, per_hour // 10, at=at, status=Status.FAILED, steps=3)
            if name == "day-pruned":
                retention.prune(now=at + timedelta(hours=1))
            with connection.cursor() as cursor:
                cursor.execute("VACUUM executions_execution, executions_stepexecution")
        with connection.cursor() as cursor:
            cursor.execute(load.TABLES_SIZE_SQL)
            sizes[name] = cursor.fetchone()[0] / 2**20
            cursor.execute("SELECT count(*) FROM executions_execution")
            sizes[f"{name} rows"] = cursor.fetchone()[0]
    results.add(
        Row(
            "11",
            f"database after a simulated day of {24 * per_hour:,} executions x 3 steps: "
            "pruned hourly (completed 6 h, failed 12 h) vs kept",
            f"{sizes['day-pruned']:.1f} MB ({sizes['day-pruned rows']:,} executions)",
            f"{sizes['day-kept']:.1f} MB ({sizes['day-kept rows']:,})",
            f"{sizes['day-pruned'] / sizes['day-kept']:.2f}",
        )
    )
    database.truncate_executions()


def run(results: Report, *, hot: list[fixtures.Target], sizes: Sizes) -> None:
    pruning_under_load(results, hot=hot, finished=sizes.finished)
    pause_takes_effect(results, target=hot[0])
    limited = capacity.workflow("delayed", f"max_parallel_executions: {LIMIT}\n{capacity.NOOP}")
    delayed_runs(
        results,
        target=fixtures.Target(team=limited.team, workflow=limited),
        delayed=sizes.delayed,
    )
    day_sizes(results, per_hour=sizes.day_per_hour)
    bulk_replay(results, replays=sizes.replays)
