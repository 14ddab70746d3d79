"""Figure 12, beside figure 5: another team's start under one team's fan-outs. On one `mantle
serve` with its defaults, team B's one-step no-op is admitted SAMPLES times, one after another,
first on an idle engine (the reference), then while team A fans out 3 x 10,000 no-op branches
and 2 x 10,000 branches of a 2 s sleep (every branch window full, the slots held by sleeps):
the latency from B's admission to its first step's start, in the database's own times. The
claims take the teams in turn at the cost of an index probe per team (docs/performance.md,
Claims), so it must stay under a second whatever A's backlog."""

from __future__ import annotations

import contextlib
import time
from datetime import datetime

from bench import capacity, database, servers
from bench.report import Report, Row, percentile
from executions.models import TERMINAL, Execution, StepExecution
from executions.services.admission import execution_admit
from executions.services.lifecycle import NotCancellable, execution_cancel
from teams.models import Team
from teams.services import team_create
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

FLOOD_TEAM = "bench-flood"
BRANCHES = 10_000
NOOP_FANOUTS, SLEEP_FANOUTS = 3, 2
SLEEP_SECONDS = 2.0
SAMPLES = 10
GOAL_MS = 1000.0
BACKLOG = 2_000  # A's pending branches before B's samples begin


def _flood_workflow(name: str, action: str) -> WorkflowDefinition:
    team = Team.objects.filter(slug=FLOOD_TEAM).first() or team_create(
        slug=FLOOD_TEAM, max_concurrent_executions=0
    )
    items = ", ".join(str(n) for n in range(BRANCHES))
    body = (
        f"name: {name}\nsteps:\n  - name: branch\n    action: {action}\n    for_each: [{items}]\n"
    )
    if action == "test/sleep":
        body += f"    params: {{seconds: {SLEEP_SECONDS}}}\n"
    workflow_apply(team=team, content=body)
    return WorkflowDefinition.objects.select_related("team").get(team=team, name=name)


def _started_at(execution: Execution) -> datetime:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        started = (
            StepExecution.objects.filter(execution=execution, started_at__isnull=False)
            .values_list("started_at", flat=True)
            .first()
        )
        if started is not None:
            return started
        time.sleep(0.01)
    raise RuntimeError(f"team B's execution {execution.id} did not start within 60 s")


def _latencies(noop: WorkflowDefinition) -> list[float]:
    """SAMPLES of team B: admission → first step started, in ms, one after another."""
    latencies = []
    for _ in range(SAMPLES):
        execution = execution_admit(team=noop.team, workflow=noop).execution
        started = _started_at(execution)
        latencies.append((started - execution.created_at).total_seconds() * 1000)
        time.sleep(0.2)
    return latencies


def _pending_branches(team: Team) -> int:
    return StepExecution.objects.filter(
        team=team, status="pending", fanout_index__isnull=False
    ).count()


def _flood(workflows: list[WorkflowDefinition]) -> list[Execution]:
    executions = [execution_admit(team=w.team, workflow=w).execution for w in workflows]
    deadline = time.monotonic() + 120
    while _pending_branches(workflows[0].team) < BACKLOG:
        if time.monotonic() > deadline:
            raise RuntimeError(f"team A's fan-outs made no backlog of {BACKLOG} in 120 s")
        time.sleep(0.1)
    return executions


def _stop(executions: list[Execution]) -> None:
    for execution in executions:
        with contextlib.suppress(NotCancellable):
            execution_cancel(execution.id, reason="bench over")
    deadline = time.monotonic() + 60
    ids = [e.id for e in executions]
    while Execution.objects.filter(id__in=ids).exclude(status__in=TERMINAL).exists():
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)


def run(report: Report) -> None:
    noop = capacity.workflow("noop", capacity.NOOP)
    flood = [_flood_workflow(f"flood-noop-{n}", "test/noop") for n in range(NOOP_FANOUTS)]
    flood += [_flood_workflow(f"flood-sleep-{n}", "test/sleep") for n in range(SLEEP_FANOUTS)]
    database.truncate_executions()
    try:
        with servers.serve():
            idle = _latencies(noop)
            executions = _flood(flood)
            backlog = _pending_branches(flood[0].team)
            crowded = _latencies(noop)
            still_running = (
                Execution.objects.filter(id__in=[e.id for e in executions])
                .exclude(status__in=TERMINAL)
                .count()
            )
            _stop(executions)
    finally:
        database.truncate_executions()
    worst = max(crowded)
    report.add(
        Row(
            "12 fairness",
            f"team B start latency under team A's fan-out ({NOOP_FANOUTS} x {BRANCHES:,} no-op"
            f" and {SLEEP_FANOUTS} x {BRANCHES:,} {SLEEP_SECONDS:g} s sleep branches, {backlog:,}"
            f" pending at the start): admission → first step started, {SAMPLES} in a row",
            f"p50 {percentile(crowded, 50):.0f} ms, max {worst:.0f} ms",
            f"idle engine: p50 {percentile(idle, 50):.0f} ms, max {max(idle):.0f} ms",
            f"{percentile(crowded, 50) / percentile(idle, 50):.2f}",
            f"max < {GOAL_MS:.0f} ms",
            "yes" if worst < GOAL_MS and still_running == len(executions) else "NO",
        )
    )
    report.notes.append(
        "figure 12: the reference is the same latency on the same serve before team A's"
        f" fan-outs; of team A's {len(executions)} executions, {still_running} were still"
        " running when the samples ended (all must be), then they were cancelled"
    )
