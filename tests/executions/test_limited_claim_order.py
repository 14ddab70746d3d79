"""Waiting steps (docs/limits.md, Step scope): the limit-aware claim's order (mantle_claim_limited:
the teams in turn, the team holding fewest units first, then execution priority, then FIFO; a
step that does not fit closes its limits for the steps behind it, and steps behind it under other
limits are still claimed, however deep in the backlog they are), and how an advance resolves
the limits its new steps list."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from engine import dispatch, orchestrator, runner
from executions.models import StepExecution, StepStatus
from executions.services.admission import execution_admit
from teams.models import Team
from teams.services import named_limit_set, team_create
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)


def _listing(team: Team, limit: str) -> WorkflowDefinition:
    content = (
        f"name: uses-{limit}\nsteps:\n  - name: call\n    action: test/noop\n"
        f"    limits: [{limit}]\n"
    )
    return workflow_apply(team=team, content=content).workflow


def _waiting(workflow: WorkflowDefinition, *, priority: int = 0) -> StepExecution:
    execution = execution_admit(team=workflow.team, workflow=workflow, priority=priority).execution
    orchestrator.executions_start(10, owner="starter", room=0)
    step = StepExecution.objects.get(execution=execution)
    assert step.status == StepStatus.WAITING
    return step


def _claimed(room: int) -> list[int]:
    return [claim.id for claim in dispatch.steps_claim_limited("test", room)]


def test_a_step_deep_behind_steps_of_a_full_limit_is_claimed(team: Team) -> None:
    """One unit free in all (beta's): the claim's first read takes one step of the team, an
    alpha step that does not fit; the beta step behind a backlog of alpha steps is claimed."""
    named_limit_set(team=team, name="alpha", max=1)
    named_limit_set(team=team, name="beta", max=1)
    alpha, beta = _listing(team, "alpha"), _listing(team, "beta")
    holder = _waiting(alpha)
    assert _claimed(1) == [holder.id]
    for _ in range(5):
        _waiting(alpha)
    behind = _waiting(beta)
    assert _claimed(1) == [behind.id]
    assert _claimed(10) == []


def test_the_teams_take_turns_fewest_units_first_then_priority_then_fifo(team: Team) -> None:
    limit = named_limit_set(team=None, name=f"g-{uuid.uuid4().hex[:8]}", max=1)[0].name
    other = team_create(slug=f"t-{uuid.uuid4().hex[:8]}")
    ours, theirs = _listing(team, limit), _listing(other, limit)
    holder = _waiting(ours)
    assert _claimed(5) == [holder.id]  # our team now holds the one unit
    first, urgent, last = _waiting(ours), _waiting(ours, priority=5), _waiting(ours)
    single = _waiting(theirs)
    steps = StepExecution.objects.in_bulk([first.id, urgent.id, last.id, single.id])
    assert steps[urgent.id].priority == 5  # the execution's, copied on insert
    assert (steps[urgent.id].team_id, steps[single.id].team_id) == (team.id, other.id)
    named_limit_set(team=None, name=limit, max=4)
    # Each team's first (theirs first: ours holds a unit), then our second, then our third.
    assert _claimed(2) == [single.id, urgent.id]
    assert _claimed(5) == [first.id]
    named_limit_set(team=None, name=limit, max=5)
    assert _claimed(5) == [last.id]


TWO_STEPS = """
name: two-steps
steps:
  - name: first
    action: test/noop
  - name: call
    action: test/noop
    depends_on: [first]
    limits: [stripe-api]
"""


def _first_steps_settled(workflow: WorkflowDefinition, executions: int) -> CaptureQueriesContext:
    """Admit and start `executions` of TWO_STEPS, then settle their first steps in one batch
    (whose advance creates the limited steps): that settle's queries."""
    for _ in range(executions):
        execution_admit(team=workflow.team, workflow=workflow)
    orchestrator.executions_start(executions, owner="starter", room=0)
    claims = dispatch.steps_claim("test", executions)
    assert len(claims) == executions
    done = runner.Outcome(StepStatus.COMPLETED)
    with CaptureQueriesContext(connection) as queries:
        runner.settle([runner.Settlement(claim, "test", done) for claim in claims])
    return queries


def test_one_advance_reads_a_teams_step_limits_once(team: Team) -> None:
    limit, _ = named_limit_set(team=team, name="stripe-api", max=2)
    queries = _first_steps_settled(workflow_apply(team=team, content=TWO_STEPS).workflow, 5)
    reads = [q for q in queries.captured_queries if "teams_namedlimit" in q["sql"]]
    assert len(reads) == 1, [q["sql"] for q in reads]
    waiting = StepExecution.objects.filter(name="call", status=StepStatus.WAITING)
    assert sorted(waiting.values_list("limit_ids", flat=True)) == [[limit.id]] * 5


def test_a_step_whose_limit_was_deleted_since_applied_fails(team: Team) -> None:
    limit, _ = named_limit_set(team=team, name="stripe-api", max=2)
    workflow = workflow_apply(team=team, content=TWO_STEPS).workflow
    limit.delete()
    _first_steps_settled(workflow, 1)
    step = StepExecution.objects.get(name="call")
    assert (step.status, step.error) == (
        StepStatus.FAILED,
        "unknown named limit 'stripe-api' (deleted since applied)",
    )
