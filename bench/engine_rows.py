"""Figures 5 and 6's rows (bench/engine.py): each Mantle measure beside DBOS's, with its ratio
and goal."""

from __future__ import annotations

from bench import cpu, floor
from bench.measure import Measure
from bench.report import Report, Row

CPU_GOAL_MS = 3.5  # per no-op execution through the service, every process (bench.cpu)
FLOOR_GOAL = 0.5  # no-ops through the service over pgbench's floor (bench.floor)


def seconds(measure: Measure) -> str:
    if measure.finished:
        return f"{measure.seconds:.1f} s"
    return f"> {measure.seconds:.0f} s ({measure.done:,} of {measure.count:,} done)"


def speed(ours: Measure, theirs: Measure) -> str:
    """Mantle's speed over DBOS's (its time over ours): above 1, Mantle is ahead."""
    ratio = theirs.seconds / ours.seconds
    return f"{ratio:.2f}" if ours.finished else f"< {ratio:.2f}"


def timed_row(
    figure: str, scenario: str, ours: Measure, theirs: Measure, goal_s: float, at_once: int
) -> Row:
    met = (
        ours.finished and not ours.failed and ours.seconds < goal_s and ours.max_running >= at_once
    )
    return Row(
        figure,
        scenario,
        f"{seconds(ours)}, {ours.max_running:,} at once",
        f"{seconds(theirs)}, {theirs.max_running:,} at once",
        speed(ours, theirs),
        f"< {goal_s:.0f} s, {at_once:,} at once",
        "yes" if met else "NO",
    )


def rate(measure: Measure) -> str:
    rate = f"{measure.rate:,.1f} /s"
    return rate if measure.finished else f"{rate} ({measure.done:,} of {measure.count:,} done)"


def rate_row(
    figure: str, scenario: str, ours: Measure, theirs: Measure, goal: str, met: bool
) -> Row:
    return Row(
        figure,
        scenario,
        rate(ours),
        rate(theirs),
        f"{ours.rate / theirs.rate:.2f}",
        goal,
        "yes" if met and ours.finished and not ours.failed else "NO",
    )


def cpu_row(scenario: str, ours: Measure, theirs: Measure, goal_ms: float | None) -> Row:
    mine = sum(ours.cpu_seconds.values()) * 1000 / ours.done if ours.done else float("nan")
    peer = sum(theirs.cpu_seconds.values()) * 1000 / theirs.done if theirs.done else float("nan")
    return Row(
        "6 throughput",
        f"CPU per execution, {scenario} (bench.cpu: user + system of every process)",
        cpu.per_execution_ms(ours.cpu_seconds, ours.done),
        cpu.per_execution_ms(theirs.cpu_seconds, theirs.done),
        f"{peer / mine:.2f}",
        f"≤ {goal_ms:.1f} ms" if goal_ms else "",
        ("yes" if mine <= goal_ms else "NO") if goal_ms else "",
    )


def cpu_and_floor(
    report: Report,
    http: Measure,
    theirs_http: Measure,
    service: Measure,
    theirs_service: Measure,
    the_floor: floor.Floor,
) -> None:
    """CPU per no-op execution beside DBOS's (the ratio: its CPU over ours), then the no-op
    rates over the floor (bench.floor)."""
    report.add(cpu_row("one-step no-op over HTTP", http, theirs_http, None))
    report.add(cpu_row("one-step no-op through the service", service, theirs_service, CPU_GOAL_MS))
    floor_name = (
        f"pgbench's floor: the insert, claim and finish of one execution, three commits,"
        f" {floor.CLIENTS} clients"
    )
    report.add(
        Row(
            "6 throughput",
            f"no-op executions through the service (vs {floor_name})",
            f"{service.rate:,.1f} /s",
            f"{the_floor.rate:,.1f} /s, PostgreSQL {the_floor.cpu_ms:.2f} ms CPU each",
            f"{service.rate / the_floor.rate:.2f}",
            f"≥ {FLOOR_GOAL:.2f}",
            "yes" if service.rate / the_floor.rate >= FLOOR_GOAL else "NO",
        )
    )
    report.add(
        Row(
            "6 throughput",
            "no-op executions over HTTP (vs the same floor)",
            f"{http.rate:,.1f} /s",
            f"{the_floor.rate:,.1f} /s",
            f"{http.rate / the_floor.rate:.2f}",
        )
    )
