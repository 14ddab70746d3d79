"""Step-scope limits and rates (docs/limits.md, Step scope) against real step-worker processes:
a step holds its limits' units only while it runs; while it waits it holds no worker slot and
its execution stays running; a killed worker's units come back after its lease; a cancelled
execution's waiting steps leave the wait and free nothing they did not hold; a global limit
serves the teams in turn; a rate admits its max per window (per key value when per key), each
step within a second of its earliest moment."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from executions.models import Execution, StepExecution, StepStatus
from executions.services.lifecycle import execution_cancel
from teams.models import NamedLimit, Team
from teams.services import named_limit_set, named_rate_set, team_create
from tests.concurrency.harness import UnitSampler
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.processes import Cluster
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply


def limited(name: str, *, seconds: float, units: int = 1, count: int = 0, extra: str = "") -> str:
    fan_out = f'for_each: "{{{{ {list(range(count))} }}}}"' if count else ""
    return f"""
name: {name}
steps:
  - name: call
    action: test/sleep
    {fan_out}
    limits: [{{name: stripe-api, units: {units}}}]
    params: {{seconds: {seconds}}}
{extra}
"""


@pytest.fixture
def team(transactional_db: None) -> Team:
    return team_create(slug=f"t-{uuid.uuid4().hex[:8]}")


def with_limit(team: Team, content: str, *, max: int) -> tuple[WorkflowDefinition, NamedLimit]:
    """Apply the workflow after setting the team's `stripe-api` limit to `max`."""
    limit, _ = named_limit_set(team=team, name="stripe-api", max=max)
    return workflow_apply(team=team, content=content).workflow, limit


def steps_of(execution: Execution, name: str = "call") -> list[StepExecution]:
    return list(StepExecution.objects.filter(execution=execution, name=name).order_by("id"))


def test_steps_hold_a_limit_only_while_they_run_and_never_above_its_max(
    engine: Callable[..., Cluster], team: Team
) -> None:
    workflow, limit = with_limit(team, limited("charge", seconds=0.3, count=12), max=3)
    sampler = UnitSampler(limit.id, pause=0.005)
    sampler.start()
    engine(workers=2, slots=20)
    try:
        execution = wait_terminal(run(workflow), timeout=60)
    finally:
        sampler.stop()
    assert execution.status == "completed", execution.error
    assert sampler.samples > 100
    assert sampler.most == 3
    branches = [s for s in steps_of(execution) if s.fanout_index is not None]
    assert len(branches) == 12
    assert all(s.status == StepStatus.COMPLETED for s in branches)
    assert all(s.limit_ids == [limit.id] and s.limit_units == [1] for s in branches)


FREE_STEPS = """
name: free
steps:
  - name: a
    action: test/noop
  - name: b
    action: test/noop
    depends_on: [a]
  - name: c
    action: test/noop
    depends_on: [b]
"""


def test_waiting_steps_hold_no_worker_slot(engine: Callable[..., Cluster], team: Team) -> None:
    workflow, _ = with_limit(team, limited("charge", seconds=15, count=51), max=1)
    free = workflow_apply(team=team, content=FREE_STEPS).workflow
    engine(workers=1, slots=2)
    held = run(workflow)
    wait_for(
        lambda: (
            StepExecution.objects.filter(
                execution=held, status="running", fanout_index__isnull=False
            ).count()
            == 1
            and StepExecution.objects.filter(execution=held, status="waiting").count() == 50
        ),
        timeout=30,
    )
    # One slot holds the running branch; the 50 waiting hold none: the other slot runs the rest.
    executions = [run(free) for _ in range(3)]
    for execution in executions:
        assert wait_terminal(execution, timeout=10).status == "completed"
    held.refresh_from_db()
    assert held.status == "running"
    assert StepExecution.objects.filter(execution=held, status="waiting").count() == 50


def test_a_killed_workers_units_come_back_after_its_lease(
    engine: Callable[..., Cluster], team: Team
) -> None:
    workflow, limit = with_limit(team, limited("charge", seconds=60), max=1)
    sampler = UnitSampler(limit.id, pause=0.01)
    sampler.start()
    engine(workers=1, slots=5)
    doomed = run(workflow)
    [step] = wait_for(lambda: [s for s in steps_of(doomed) if s.status == "running"], timeout=30)
    waiting = run(workflow)
    wait_for(lambda: steps_of(waiting) and steps_of(waiting)[0].status == "waiting")
    os.kill(int(step.lease_owner.split(":")[1]), signal.SIGKILL)
    # The lease runs out, the reaper ends the attempt, the unit goes to the waiting step.
    wait_for(lambda: steps_of(waiting)[0].status == "running", timeout=30)
    sampler.stop()
    [lost] = steps_of(doomed)
    assert lost.status == "failed" and "lease expired" in lost.error
    assert steps_of(waiting)[0].started_at >= step.lease_expires_at
    assert sampler.most == 1
    execution_cancel(waiting.id)


def test_a_cancelled_executions_waiting_step_leaves_the_wait_and_frees_nothing(
    engine: Callable[..., Cluster], team: Team
) -> None:
    workflow, limit = with_limit(team, limited("charge", seconds=2), max=1)
    sampler = UnitSampler(limit.id, pause=0.01)
    engine(workers=1, slots=5)
    holder = run(workflow)
    wait_for(lambda: [s for s in steps_of(holder) if s.status == "running"], timeout=30)
    cancelled, behind = run(workflow), run(workflow)
    wait_for(lambda: len(StepExecution.objects.filter(status="waiting")) == 2)
    sampler.start()
    execution_cancel(cancelled.id)
    [step] = steps_of(cancelled)
    assert step.status == "cancelled" and step.started_at is None
    # The unit stays with its holder: the step behind waits until the holder ends.
    assert steps_of(behind)[0].status == "waiting"
    assert wait_terminal(holder, timeout=30).status == "completed"
    assert wait_terminal(behind, timeout=30).status == "completed"
    sampler.stop()
    assert sampler.most == 1
    assert steps_of(behind)[0].started_at >= steps_of(holder)[0].completed_at


GPU_STEP = """
name: render
steps:
  - name: call
    action: test/sleep
    limits: [gpu]
    params: {seconds: 0.2}
"""


def test_a_global_limit_serves_the_teams_in_turn(
    engine: Callable[..., Cluster], team: Team
) -> None:
    """Team A has 1,000 steps waiting for the global limit, team B one: B's step runs within one
    round (no more than one of A's starts between B's wait and B's start)."""
    named_limit_set(team=None, name="gpu", max=2)
    flood_steps = GPU_STEP.replace("name: render", "name: flood\ninputs: {items: {}}").replace(
        "limits: [gpu]", 'limits: [gpu]\n    for_each: "{{ inputs.items }}"'
    )
    busy = workflow_apply(team=team, content=flood_steps).workflow
    other = workflow_apply(
        team=team_create(slug=f"t-{uuid.uuid4().hex[:8]}"), content=GPU_STEP
    ).workflow
    engine(workers=1, slots=20)
    flood = run(busy, items=list(range(1000)))
    wait_for(
        lambda: StepExecution.objects.filter(execution=flood, status="waiting").count() >= 990,
        timeout=60,
    )
    single = run(other)
    [step] = wait_for(
        lambda: [s for s in steps_of(single) if s.status in ("running", "completed")], timeout=30
    )
    ahead = StepExecution.objects.filter(
        execution=flood, started_at__gt=step.created_at, started_at__lt=step.started_at
    ).count()
    print(
        f"B waited {(step.started_at - step.created_at).total_seconds():.3f}s, {ahead} of A ahead"
    )
    assert ahead <= 1
    assert StepExecution.objects.filter(execution=flood, status="waiting").count() > 900
    execution_cancel(flood.id)
    assert wait_terminal(single).status == "completed"


RATED = """
name: calls
inputs: {customer: {type: string}, items: {}}
steps:
  - name: call
    action: test/noop
    for_each: "{{ inputs.items }}"
    rate_limit: {name: stripe-calls, key: "{{ inputs.customer }}"}
"""


def starts(execution: Execution) -> list[datetime]:
    return sorted(s.started_at for s in steps_of(execution) if s.fanout_index is not None)


def test_a_step_rate_admits_its_max_per_window_and_each_step_within_a_second_of_its_moment(
    engine: Callable[..., Cluster], team: Team
) -> None:
    named_rate_set(team=team, name="stripe-calls", max=4, period=timedelta(seconds=2))
    workflow = workflow_apply(team=team, content=RATED).workflow
    engine(workers=1, slots=20)
    execution = wait_terminal(run(workflow, customer="acme", items=list(range(12))), timeout=60)
    assert execution.status == "completed", execution.error
    started = starts(execution)
    assert len(started) == 12
    window = timedelta(seconds=2)
    for i, moment in enumerate(started):
        # Never more than 4 claims in any trailing window of 2 s ...
        assert sum(1 for other in started if moment - window < other <= moment) <= 4
        # ... and never later than 1 s after the window first admitted it.
        if i >= 4:
            earliest = started[i - 4] + window
            assert moment - earliest <= timedelta(seconds=1), (i, moment - earliest)


def test_a_rate_per_key_keeps_a_window_per_key_value(
    engine: Callable[..., Cluster], team: Team
) -> None:
    named_rate_set(team=team, name="stripe-calls", max=1, period=timedelta(seconds=3), per_key=True)
    workflow = workflow_apply(team=team, content=RATED).workflow
    engine(workers=1, slots=20)
    first, again, other = (
        run(workflow, customer=customer, items=[0]) for customer in ("acme", "acme", "beta")
    )
    for execution in (first, again, other):
        assert wait_terminal(execution, timeout=30).status == "completed"
    [a1], [a2], [b1] = starts(first), starts(again), starts(other)
    assert abs(b1 - min(a1, a2)) < timedelta(seconds=1.5)  # beta's window is its own
    assert abs(a2 - a1) >= timedelta(seconds=3)
