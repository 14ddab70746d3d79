"""Figures 5 and 6: what the engine does with what admission lets in, side by side with DBOS
Transact (bench.peer) on the same PostgreSQL in the same run, each scenario on DBOS right after
Mantle (the ratios compare one moment of a changing load).

Figure 5, capacity: 1,000 `http/request` steps to a local server that holds each request 5 s;
then the same steps in one step worker with as many slots, and its peak RSS (bench.memory).
Figure 6, throughput: one-step no-op executions over HTTP and through the service; one
execution fanning out 1,000 branches of a 1 s sleep at `max_parallel: 100`; a burst under a
limit of 5 (0.2 s of work each), where promotion on completion meets DBOS's queue polling, and
the promotion → running latency of that burst. Each Mantle scenario runs on a fresh
`mantle serve` with its defaults (web and workers; loopback allowed to http/request), after one
warm-up execution.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg.conninfo import conninfo_to_dict

from bench import capacity, cpu, database, floor, holding, memory, servers
from bench import engine_rows as rows
from bench.measure import Measure
from bench.report import Report, Row, percentile
from executions.models import TERMINAL, Execution
from executions.services.admission import execution_admit
from workflows.models import WorkflowDefinition

PEER_DATABASE = f"{database.NAME}_dbos"  # one per bench database: benches may share a server
CAPACITY_GOAL_S = 10.0
HTTP_GOAL = 200.0
SERVICE_GOAL = 350.0
FANOUT_GOAL_S = 12.0
LIMITED_GOAL = 4.0  # times DBOS's completions per second
PROMOTION_GOAL_MS = 50.0
MEMORY_GOAL_MB = 300.0  # RSS of one step worker with 1,000 steps in flight
DBOS_POLLING_MS = 1000.0
FLOOR_SECONDS = 5  # a DBOS queue's default polling_interval_sec


@dataclass(frozen=True)
class Sizes:
    steps: int = 1_000  # figure 5, and the steps in flight in one step worker for its memory
    noops: int = 1_000
    branches: int = 1_000
    max_parallel: int = 100
    branch_seconds: float = 1.0
    burst: int = 500
    limit: int = 5
    work_seconds: float = 0.2


def _warm_up() -> None:
    """One execution through the cluster: its workers are up before anything is timed."""
    definition = capacity.workflow("warm-up", capacity.NOOP)
    execution = execution_admit(team=definition.team, workflow=definition).execution
    deadline = time.monotonic() + 60
    while not Execution.objects.filter(id=execution.id, status__in=TERMINAL).exists():
        if time.monotonic() > deadline:
            raise RuntimeError("mantle serve did not run a warm-up execution within 60 s")
        time.sleep(0.1)


def _progress(name: str, measure: Measure) -> None:
    print(
        f"  {name}: {measure.done:,} of {measure.count:,} in {measure.seconds:.1f} s,"
        f" {measure.max_running:,} at once, {measure.failed} failed",
        flush=True,
    )


def _on_mantle(
    name: str, scenario: Callable[[str], Measure], *, settings: dict[str, str] | None = None
) -> Measure:
    database.truncate_executions()
    # Its defaults, but for the egress policy (the holding server is on loopback, which
    # http/request refuses unless allowed) and the scenario's `settings`.
    environment = {"MANTLE_ENGINE_HTTP": "{allow: [127.0.0.1]}", **(settings or {})}
    try:
        with servers.serve(environment=environment) as base:
            _warm_up()
            serving = cpu.children("mantle_serve")
            with cpu.Meter(database=database.NAME, roots=serving) as meter:
                measure = scenario(base)
            measure = Measure(**{**measure.to_json(), "cpu_seconds": meter.seconds})
    finally:
        database.truncate_executions()
    _progress(f"Mantle {name}", measure)
    return measure


def _in_one_worker(calls: WorkflowDefinition, steps: int) -> tuple[Measure, float]:
    """`steps` held HTTP steps in flight in one step worker with as many slots; its peak RSS."""
    peak = memory.PeakRss()

    def scenario(base: str) -> Measure:
        with memory.peak_rss(base.removeprefix("http://")) as sampled:
            measure = capacity.through_service(calls, steps)
        peak.mb = sampled.mb
        return measure

    one_worker = {"MANTLE_ENGINE_WORKERS": "1", "MANTLE_ENGINE_SLOTS_PER_WORKER": str(steps)}
    measure = _on_mantle("in one worker", scenario, settings=one_worker)
    return measure, peak.mb


def _sqlalchemy_url(url: str) -> str:
    """The peer's system database as a URL SQLAlchemy reads (a socket directory as `host=`)."""
    params = conninfo_to_dict(url)
    host = str(params.get("host", ""))
    if host.startswith("/"):
        return f"postgresql://{params.get('user', 'postgres')}@/{PEER_DATABASE}?host={host}"
    return database.with_database(url, PEER_DATABASE)


def _drop_peer_database() -> None:
    mantle_database = os.environ["DATABASE_URL"]  # set by bench.database.prepare
    with psycopg.connect(
        database.with_database(mantle_database, "postgres"), autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PEER_DATABASE}" WITH (FORCE)')


def _on_peer(scenario: str, arguments: dict[str, object]) -> Measure:
    """One scenario in a fresh DBOS process."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.peer",
            _sqlalchemy_url(os.environ["DATABASE_URL"]),
            json.dumps([[scenario, arguments]]),
        ],
        cwd=servers.ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            found = json.loads(line.removeprefix("RESULT "))
            del found["scenario"]
            measure = Measure(**found)
            _progress(f"DBOS {scenario}", measure)
            if result.returncode == 0:
                return measure
    raise RuntimeError(f"the DBOS peer failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")


Pair = tuple[Measure, Measure]  # (Mantle's, DBOS's)


def _pairs(sizes: Sizes, url: str) -> dict[str, Pair]:
    """Each scenario on Mantle, then at once on DBOS, so that a ratio compares one moment of
    the machine's load."""
    calls = capacity.workflow("capacity", capacity.capacity_yaml(url))
    noop = capacity.workflow("noop", capacity.NOOP)
    fanout = capacity.workflow(
        "fanout", capacity.fanout_yaml(sizes.branches, sizes.max_parallel, sizes.branch_seconds)
    )
    limited = capacity.workflow("limited", capacity.limited_yaml(sizes.limit, sizes.work_seconds))
    key = capacity.api_key()
    noops = ("noops", {"count": sizes.noops})
    scenarios: dict[str, tuple[Callable[[str], Measure], tuple[str, dict[str, object]]]] = {
        "capacity": (
            lambda base: capacity.through_service(calls, sizes.steps),
            ("capacity", {"count": sizes.steps, "url": url}),
        ),
        "http": (lambda base: capacity.over_http(noop, sizes.noops, base=base, key=key), noops),
        "service": (lambda base: capacity.through_service(noop, sizes.noops), noops),
        "fanout": (
            lambda base: capacity.through_service(fanout, 1),
            (
                "fanout",
                {
                    "branches": sizes.branches,
                    "limit": sizes.max_parallel,
                    "seconds": sizes.branch_seconds,
                },
            ),
        ),
        "limited": (
            lambda base: capacity.limited(limited, sizes.burst),
            (
                "limited",
                {"count": sizes.burst, "limit": sizes.limit, "seconds": sizes.work_seconds},
            ),
        ),
    }
    _drop_peer_database()
    pairs = {
        name: (_on_mantle(name, ours), _on_peer(*theirs))
        for name, (ours, theirs) in scenarios.items()
    }
    # The fan-out is one execution: its units are its branches.
    fanned, theirs = pairs["fanout"]
    pairs["fanout"] = (
        Measure(
            count=sizes.branches,
            seconds=fanned.seconds,
            done=sizes.branches if fanned.finished else 0,
            failed=fanned.failed,
            max_running=fanned.max_running,
        ),
        theirs,
    )
    return pairs


def run(report: Report, *, sizes: Sizes) -> None:
    with holding.server() as url:
        pairs = _pairs(sizes, url)
        noop = capacity.workflow("noop", capacity.NOOP)
        the_floor = floor.run(noop, seconds=FLOOR_SECONDS, url=os.environ["DATABASE_URL"])
        calls = capacity.workflow("capacity", capacity.capacity_yaml(url))
        in_one, rss_mb = _in_one_worker(calls, sizes.steps)
    s = sizes
    report.add(
        rows.timed_row(
            "5 capacity",
            f"{s.steps:,} http/request steps, each held {holding.HOLD:.0f} s by a local server",
            *pairs["capacity"],
            CAPACITY_GOAL_S,
            s.steps,
        )
    )
    report.add(
        Row(
            "5 capacity",
            f"memory: the same {s.steps:,} steps in one step worker (slots_per_worker"
            f" {s.steps:,}): its peak RSS",
            f"{rss_mb:.0f} MB, {in_one.max_running:,} at once, {rows.seconds(in_one)}",
            "",
            "",
            f"< {MEMORY_GOAL_MB:.0f} MB, {s.steps:,} at once",
            "yes"
            if rss_mb < MEMORY_GOAL_MB and in_one.finished and in_one.max_running >= s.steps
            else "NO",
        )
    )
    (http, theirs_http), (service, theirs_service) = pairs["http"], pairs["service"]
    report.add(
        rows.rate_row(
            "6 throughput",
            f"{s.noops:,} one-step no-op executions over HTTP, {capacity.CLIENTS} clients",
            http,
            theirs_http,
            f"≥ {HTTP_GOAL:.0f} /s",
            http.rate >= HTTP_GOAL,
        )
    )
    report.add(
        rows.rate_row(
            "6 throughput",
            f"{s.noops:,} one-step no-op executions through the service, "
            f"{capacity.CLIENTS} threads",
            service,
            theirs_service,
            f"≥ {SERVICE_GOAL:.0f} /s",
            service.rate >= SERVICE_GOAL,
        )
    )
    rows.cpu_and_floor(report, http, theirs_http, service, theirs_service, the_floor)
    report.add(
        rows.timed_row(
            "6 throughput",
            f"one execution fanning out {s.branches:,} branches of a {s.branch_seconds:g} s "
            f"sleep, max_parallel {s.max_parallel}",
            *pairs["fanout"],
            FANOUT_GOAL_S,
            s.max_parallel,
        )
    )
    limited, theirs_limited = pairs["limited"]
    ratio = limited.rate / theirs_limited.rate
    report.add(
        rows.rate_row(
            "6 throughput",
            f"burst of {s.burst} under a limit of {s.limit}, {s.work_seconds:g} s of work each:"
            " completions",
            limited,
            theirs_limited,
            f"≥ {LIMITED_GOAL:.2f}",
            ratio >= LIMITED_GOAL,
        )
    )
    latencies = limited.latencies_ms
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    report.add(
        Row(
            "6 throughput",
            f"promotion → running in that burst ({len(latencies)} samples)",
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms",
            f"{DBOS_POLLING_MS / 1000:.0f} s (DBOS queue polling)",
            f"{p99 / DBOS_POLLING_MS:.3f}",
            f"p99 < {PROMOTION_GOAL_MS:.0f} ms",
            "yes" if p99 < PROMOTION_GOAL_MS else "NO",
        )
    )
    failed = {name: m.failed for name, (m, _) in pairs.items() if m.failed}
    failed |= {f"DBOS {name}": m.failed for name, (_, m) in pairs.items() if m.failed}
    if in_one.failed:
        failed["in one worker"] = in_one.failed
    if failed:
        report.notes.append(f"figures 5 and 6: failed executions or workflows: {failed}")
    report.notes.append(
        "figures 5 and 6: the reference is DBOS Transact (bench/peer.py: one process, its"
        " defaults, its own system database on the same PostgreSQL), each scenario run in a fresh"
        " DBOS process right after Mantle's run of it; workflows without a limit start with"
        " DBOS.start_workflow from 16 threads, limits"
        " are DBOS queues (register_queue, global_concurrency); the ratio is Mantle's speed over"
        " DBOS's (its time over ours, our rate over its rate), above 1 Mantle is ahead; each"
        f" Mantle scenario is cut after {capacity.DEADLINE:.0f} s"
    )
