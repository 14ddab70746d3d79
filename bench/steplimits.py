"""Figure 10: step-scope limits (docs/limits.md, Step scope). 1,000 executions of a 3-step
workflow (no-op, 0.1 s of work, no-op) on a fresh `mantle serve` with its defaults:

- step scope: the middle step holds a named limit of 10, so completions can reach at best
  10 / 0.1 s = 100/s (the ideal, the reference of the ratio), while the no-op steps run freely;
- execution scope: the same workflow under `max_parallel_executions: 10`, which holds each slot
  for the whole execution (the ratio of the two shows what step scope buys);
- hand-off: each time a middle step ends, how long until the next waiting one starts (the
  latest end before each start that waited, over every start after the first 10), p99;
- the peer, right after the step-scope run: Prefect 3 on the same scenario, its global
  concurrency limit taken inside the middle task (bench.prefect_server, bench.prefect_peer),
  scaled down to PEER_EXECUTIONS chains cut at PEER_DEADLINE (it completes about one a second
  here): its completions per second and hand-off p99 against Mantle's.
- claim cost: figure 6's 1,000 one-step no-op executions through the service, their step
  listing a limit of 1,000 units (never full: only the cost of the limit-aware claim and its
  locks shows) vs the same step listing none.
"""

from __future__ import annotations

import time

from django.db.models import Max, Min

from bench import capacity, prefect_server
from bench.engine import _on_mantle, _progress
from bench.measure import Measure, UnitBudget, handoffs_ms, unit_budget
from bench.report import Report, Row, percentile
from executions.models import Execution, StepExecution
from teams.models import Team
from teams.services import named_limit_set, team_create

EXECUTIONS = 1_000
LIMIT = 10
WORK_SECONDS = 0.1
IDEAL = LIMIT / WORK_SECONDS  # completions per second
THROUGHPUT_GOAL = 0.9  # of the ideal
HANDOFF_GOAL_MS = 50.0
PEER_EXECUTIONS = 200
PEER_DEADLINE = 120.0  # seconds; what finished by then is Prefect's rate
PEER_RATE_GOAL = 10.0  # Mantle's completions/s over Prefect's
PEER_HANDOFF_GOAL = 0.1  # Mantle's hand-off p99 over Prefect's
WIDE = 1_000  # units of the limit the no-op step lists in the claim-cost scenario
CLAIM_COST_GOAL = 0.8  # of the no-op throughput without a limit


def _steps(limits: str) -> str:
    return (
        "steps:\n"
        "  - name: before\n    action: test/noop\n"
        f"  - name: work\n    action: test/sleep\n    depends_on: [before]\n{limits}"
        f"    params: {{seconds: {WORK_SECONDS}}}\n"
        "  - name: after\n    action: test/noop\n    depends_on: [work]\n"
    )


def _handoffs_ms(measure_of: str) -> list[float]:
    """For each middle step that started after the first LIMIT, the time from the latest end of
    a middle step before its start to its start."""
    rows = StepExecution.objects.filter(
        execution__workflow__name=measure_of, name="work", started_at__isnull=False
    ).values_list("started_at", "completed_at")
    intervals = [
        (started.timestamp(), completed.timestamp() if completed else float("inf"))
        for started, completed in rows
    ]
    return handoffs_ms(intervals, LIMIT)


def _budget(measure_of: str, measure: Measure) -> UnitBudget:
    """Where the limit's units went over the measured window (from the first submission to the
    last completion), from the middle steps' created, started and completed times."""
    rows = StepExecution.objects.filter(execution__workflow__name=measure_of, name="work")
    steps = [
        (created.timestamp(), started.timestamp(), completed.timestamp())
        for created, started, completed in rows.values_list(
            "created_at", "started_at", "completed_at"
        )
    ]
    last = Execution.objects.filter(workflow__name=measure_of).aggregate(last=Max("completed_at"))
    ended = last["last"].timestamp()
    return unit_budget(steps, LIMIT, ended - measure.seconds, ended)


def _budget_note(budget: UnitBudget) -> str:
    lost_ms = (budget.total - EXECUTIONS * WORK_SECONDS) / EXECUTIONS * 1000
    shares = ", ".join(
        f"{name} {seconds / EXECUTIONS * 1000:.1f} ms"
        for name, seconds in (
            ("before the first holders", budget.ramp),
            ("held beyond the work", budget.held - EXECUTIONS * WORK_SECONDS),
            ("idle, a step waiting", budget.waiting),
            ("idle, none waiting yet", budget.starved),
            ("after the last holders", budget.tail),
        )
    )
    return (
        f"figure 10: the step-scope run's {LIMIT} units lost {lost_ms:.1f} ms per middle step"
        f" (of the window's unit-seconds, those not spent in a step's {WORK_SECONDS * 1000:g} ms"
        f" of work, over its {EXECUTIONS:,} steps): {shares}"
        f" (the k-th start paired with the (k-{LIMIT})-th end); a middle step held its unit"
        f" p50 {percentile(budget.holds_ms, 50):.1f} ms, p99 {percentile(budget.holds_ms, 99):.1f}"
        f" ms (from its claim's transaction to its end's), a unit idled p50"
        f" {percentile(budget.idles_ms, 50):.1f} ms, p99 {percentile(budget.idles_ms, 99):.1f} ms;"
        f" from the first middle step's start to the last one's end, {EXECUTIONS / budget.span:.1f}"
        f" middle steps/s ({EXECUTIONS / budget.span / IDEAL:.2f} of the ideal)"
    )


def run(results: Report) -> None:
    team = Team.objects.filter(slug=capacity.TEAM).first() or team_create(
        slug=capacity.TEAM, max_concurrent_executions=0
    )
    named_limit_set(team=team, name="bench-step", max=LIMIT)
    named_limit_set(team=team, name="bench-wide", max=WIDE)
    step_scope = capacity.workflow("step-scope", _steps("    limits: [bench-step]\n"))
    execution_scope = capacity.workflow(
        "execution-scope", f"max_parallel_executions: {LIMIT}\n" + _steps("")
    )
    handoffs: list[float] = []
    admitted: list[float] = []
    budgets: list[UnitBudget] = []

    def stepped(base: str) -> Measure:
        measure = capacity.through_service(step_scope, EXECUTIONS)
        handoffs.extend(_handoffs_ms(step_scope.name))
        budgets.append(_budget(step_scope.name, measure))
        span = Execution.objects.filter(workflow=step_scope).aggregate(
            first=Min("created_at"), last=Max("created_at")
        )
        admitted.append((span["last"] - span["first"]).total_seconds())
        return measure

    step = _on_mantle("step scope", stepped)
    peer_started = time.monotonic()
    peer = prefect_server.run(
        executions=PEER_EXECUTIONS, limit=LIMIT, seconds=WORK_SECONDS, deadline=PEER_DEADLINE
    )
    peer_seconds = time.monotonic() - peer_started
    _progress("Prefect step scope", peer.measure)
    whole = _on_mantle(
        "execution scope", lambda base: capacity.through_service(execution_scope, EXECUTIONS)
    )
    label = f"{EXECUTIONS:,} x 3 steps, middle {WORK_SECONDS:g} s holding a limit of {LIMIT}"
    results.add(
        Row(
            "10",
            f"{label}: completions/s vs the ideal {IDEAL:g}/s",
            f"{step.rate:.1f}/s",
            f"{IDEAL:g}/s",
            f"{step.rate / IDEAL:.2f}",
            f">= {THROUGHPUT_GOAL}",
            "yes" if step.finished and step.rate / IDEAL >= THROUGHPUT_GOAL else "no",
        )
    )
    results.add(
        Row(
            "10",
            f"{label}: step scope vs max_parallel_executions: {LIMIT}",
            f"{step.rate:.1f}/s",
            f"{whole.rate:.1f}/s",
            f"{step.rate / whole.rate:.2f}" if whole.rate else "",
        )
    )
    results.notes.append(
        f"figure 10: the {EXECUTIONS:,} admissions of the step-scope run took {admitted[0]:.1f} s"
        f" (its ideal of {EXECUTIONS / IDEAL:g} s needs them at {IDEAL:g}/s or more)"
    )
    results.notes.append(_budget_note(budgets[0]))
    _claim_cost(results)
    p99 = percentile(handoffs, 99)
    results.add(
        Row(
            "10",
            "hand-off: a middle step ends, the next waiting one starts (p99)",
            f"{p99:.1f} ms",
            f"p50 {percentile(handoffs, 50):.1f} ms",
            "",
            f"< {HANDOFF_GOAL_MS:g} ms",
            "yes" if p99 < HANDOFF_GOAL_MS else "no",
        )
    )
    _add_peer_rows(results, step, handoffs, peer)
    results.notes.append(
        "figure 10: the peer is Prefect 3 (bench/prefect_server.py: a fresh `prefect server"
        " start` with its defaults, analytics off, on its own database of the same PostgreSQL;"
        " the limit made with `prefect gcl create`; bench/prefect_peer.py: one flow on its"
        " default ThreadPoolTaskRunner submitting each execution as three dependent tasks, the"
        " middle one inside `concurrency(name, occupy=1)`), run right after Mantle's step-scope"
        f" run, {PEER_EXECUTIONS} executions cut at {PEER_DEADLINE:g} s ({peer_seconds:.0f} s"
        " with its server's start and stop); its hand-off is from a task's release called (its"
        " work in the slot done) to the next task's slot granted, both read in its process, as"
        " Mantle's is from a step's end statement to the next claim, each side's release included"
    )


def _add_peer_rows(
    results: Report, step: Measure, handoffs: list[float], peer: prefect_server.PeerResult
) -> None:
    theirs = peer.measure
    cut = "" if theirs.finished else f", cut at {PEER_DEADLINE:g} s: {theirs.done} done"
    ratio = step.rate / theirs.rate if theirs.rate else float("inf")
    results.add(
        Row(
            "10",
            f"the same beside Prefect 3 (concurrency() inside the task, its own server on the"
            f" same PostgreSQL; {theirs.count} executions{cut}): completions/s",
            f"{step.rate:.1f}/s",
            f"Prefect {theirs.rate:.2f}/s, {theirs.max_running} at once",
            f"{ratio:.1f}",
            f">= {PEER_RATE_GOAL:g}",
            "yes" if step.finished and not step.failed and ratio >= PEER_RATE_GOAL else "no",
        )
    )
    if theirs.failed:
        results.notes.append(
            f"figure 10: {theirs.failed} of Prefect's chains failed: {'; '.join(peer.errors)}"
        )
    ours, their_p99 = percentile(handoffs, 99), percentile(peer.handoffs_ms, 99)
    results.add(
        Row(
            "10",
            "hand-off p99 beside Prefect's (its release called → the next slot granted)",
            f"{ours:.1f} ms",
            f"Prefect p99 {their_p99:.0f} ms, p50 {percentile(peer.handoffs_ms, 50):.0f} ms",
            f"{ours / their_p99:.3f}" if their_p99 else "",
            f"< {PEER_HANDOFF_GOAL:g}",
            "yes" if their_p99 and ours / their_p99 < PEER_HANDOFF_GOAL else "no",
        )
    )


def _claim_cost(results: Report) -> None:
    plain = capacity.workflow("noop", capacity.NOOP)
    listed = capacity.workflow("noop-limited", capacity.NOOP + "    limits: [bench-wide]\n")
    without = _on_mantle("no-op steps", lambda base: capacity.through_service(plain, EXECUTIONS))
    limited = _on_mantle(
        "no-op steps listing a limit", lambda base: capacity.through_service(listed, EXECUTIONS)
    )
    ratio = limited.rate / without.rate if without.rate else 0.0
    results.add(
        Row(
            "10",
            f"claim cost: {EXECUTIONS:,} one-step no-op executions, the step listing a limit of"
            f" {WIDE:,} vs none (figure 6's)",
            f"{limited.rate:.1f}/s",
            f"{without.rate:.1f}/s",
            f"{ratio:.2f}",
            f">= {CLAIM_COST_GOAL}",
            "yes" if limited.finished and ratio >= CLAIM_COST_GOAL else "no",
        )
    )
