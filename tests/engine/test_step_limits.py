"""Step-scope limits (docs/limits.md, Step scope) against real step-worker processes: a step
holds its limits' units only while it runs; while it waits it holds no worker slot and its
execution stays running; a killed worker's units come back after its lease; a cancelled
execution's waiting steps leave the wait and free nothing they did not hold."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from executions.models import Execution, StepExecution, StepStatus
from teams.models import NamedLimit, Team
from teams.services import named_limit_set, team_create
from tests.concurrency.harness import CountSampler
from tests.engine.conftest import run, wait_terminal
from tests.processes import Cluster
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply


class UnitSampler(CountSampler):
    """Units of one step-scope limit held by running steps: UnitSampler(limit_id)."""

    SQL = """
    SELECT 'units', coalesce(sum(limit_units[array_position(limit_ids, %s)]), 0)
      FROM executions_stepexecution
     WHERE status = 'running' AND limit_ids @> ARRAY[%s]::bigint[]
    """
    pause = 0.005

    def __init__(self, limit_id: int) -> None:
        super().__init__(limit_id, limit_id)


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
    sampler = UnitSampler(limit.id)
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
