"""Hostile fan-outs against real step workers (docs/hostile-input.md, engine side): a fan-out's rows
are created in bounded batches as branches become runnable, its size is limited, the reaper never
re-dispatches work, and one team's huge fan-out cannot hold back another team's start."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from engine import orchestrator, reaper
from executions.models import Execution, StepExecution
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_cancel, execution_start
from teams.services import team_create
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.processes import Cluster
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)


HUGE = """
name: huge
steps:
  - name: each
    action: test/noop
    for_each: "{{ trigger.payload }}"
"""


def run_over(workflow: WorkflowDefinition, items: int) -> Execution:
    """An execution whose trigger payload (a webhook's, say) is `items` items long."""
    payload = {"payload": list(range(items))}
    return execution_admit(team=workflow.team, workflow=workflow, trigger=payload).execution


def test_a_fanout_over_the_item_limit_fails_naming_the_limit(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    execution = run_over(apply(HUGE), 10_001)
    assert execution_start(execution.id)
    orchestrator.advance(execution.id)
    execution.refresh_from_db()
    assert execution.status == "failed"
    step = StepExecution.objects.get(execution=execution)
    assert step.error == "for_each gave 10001 items, over limits.fanout_items (10000)"
    assert StepExecution.objects.count() == 1  # no branch row written


def test_fanout_rows_are_created_in_bounded_batches_as_branches_finish(
    apply: Callable[..., WorkflowDefinition], mantle_config: Callable[..., None]
) -> None:
    mantle_config("limits", fanout_items=5000)
    execution = run_over(apply(HUGE), 5000)
    assert execution_start(execution.id)
    orchestrator.advance(execution.id)
    branches = StepExecution.objects.filter(execution=execution, fanout_index__isnull=False)
    assert branches.count() == orchestrator.FANOUT_WINDOW
    # Ten branches end: the next advance creates ten more, not the 4,000 still to come.
    finished = branches.order_by("fanout_index")[:10].values_list("id", flat=True)
    StepExecution.objects.filter(id__in=list(finished)).update(
        status="completed", completed_at=timezone.now()
    )
    orchestrator.advance(execution.id)
    assert branches.count() == orchestrator.FANOUT_WINDOW + 10
    assert branches.filter(status="pending").count() == orchestrator.FANOUT_WINDOW


def test_the_reaper_never_hands_out_pending_work_again(
    apply: Callable[..., WorkflowDefinition], mantle_config: Callable[..., None]
) -> None:
    mantle_config("engine", step_lease=0.0)  # every pending row is "older than a lease"
    execution = run_over(apply(HUGE), 50)
    assert execution_start(execution.id)
    orchestrator.advance(execution.id)
    waiting = run_over(apply(HUGE.replace("huge", "waiting")), 1)
    for _ in range(3):
        reaper.reap()
    assert OrmQ.objects.count() == 0
    assert StepExecution.objects.filter(execution=execution, status="pending").count() == 50
    assert Execution.objects.get(id=waiting.id).status == "pending"


def test_a_50000_branch_fanout_of_one_team_does_not_hold_back_another_teams_start(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    cluster_slots = 2 * 100
    engine(env={"MANTLE_LIMITS_FANOUT_ITEMS": "50000"})
    flood = run_over(apply(HUGE), 50_000)
    done = StepExecution.objects.filter(execution=flood, status="completed")
    wait_for(lambda: done.count() >= 200, timeout=60)
    other_team = team_create(slug="other")
    quick = workflow_apply(
        team=other_team, content="name: quick\nsteps:\n  - name: only\n    action: test/noop\n"
    ).workflow
    admitted_at = timezone.now()
    other = wait_terminal(run(quick), timeout=30)
    assert other.status == "completed"
    step = StepExecution.objects.get(execution=other)
    # Team B's step waited behind at most the branches already claimed, not behind the flood.
    overtaken = StepExecution.objects.filter(
        execution=flood, started_at__gt=admitted_at, started_at__lt=step.started_at
    ).count()
    flood.refresh_from_db()
    print(
        f"team B: admitted -> started {(step.started_at - admitted_at).total_seconds():.2f}s,"
        f" {overtaken} of team A's branches started in between"
    )
    assert flood.status == "running"  # long before the flood is over
    assert overtaken <= 2 * cluster_slots
    execution_cancel(flood.id)
