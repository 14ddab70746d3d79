"""Delayed runs admitted in one statement (mantle_admit_due.sql) are decided exactly as
admissions one at a time are: the same sequence of runs, scheduled in one team and admitted as a
due batch, and admitted one by one through execution_admit in a second team made alike, ends in
the same statuses, labels, named limits, keys and FIFO order, whatever the workflow's limits,
strategies and pauses; FIFO tails are queued behind their leader."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from executions.models import Execution, Rejection, Status
from executions.services import scheduled
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.pauses import workflow_pause_set
from executions.services.scheduled import execution_schedule, scheduled_admit_due
from teams.models import Team
from teams.services import named_limit_set
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db(transaction=True)

KEYED = (
    'concurrency_key: "{{ inputs.customer }}"\n'
    "inputs:\n  customer:\n    type: string\n  plan:\n    type: string\n    default: free\n"
)


@dataclass(frozen=True)
class Scenario:
    limit: int = 0
    on_limit: str = "queue"
    extra: str = ""
    team_limit: int | None = None
    named: int | None = None  # the max of a named limit `api` the workflow lists
    paused: bool = False
    # The runs' inputs, in order.
    inputs: list[dict[str, Any]] = field(default_factory=lambda: [{}] * 12)


CUSTOMERS = [{"customer": c} for c in "aabbbacaabcc"]
SCENARIOS = {
    "a workflow limit": Scenario(limit=2),
    "a team limit": Scenario(team_limit=3),
    "a named limit": Scenario(named=2, extra="limits: [api]\n"),
    "a pause": Scenario(limit=5, paused=True),
    "rejected when full": Scenario(limit=3, on_limit="reject"),
    "the latest kept": Scenario(limit=1, on_limit="keep_latest"),
    "the oldest cancelled": Scenario(limit=2, on_limit="cancel_running"),
    "a queue of at most 3": Scenario(limit=1, extra="max_queued: 3\n"),
    "a debounce": Scenario(extra="debounce: 1m\n"),
    "a key each": Scenario(limit=2, extra=KEYED + "max_parallel_per_key: 1\n", inputs=CUSTOMERS),
    "key limits from an expression": Scenario(
        limit=3,
        extra=KEYED + "max_parallel_per_key: \"{{ inputs.plan == 'pro' ? 2 : 1 }}\"\n",
        inputs=[{**c, "plan": "pro" if i % 3 else "free"} for i, c in enumerate(CUSTOMERS)],
    ),
    # A tail keeps its leader's key limit: a run of the same key with a lower one is not of it.
    "a key limit lower than the leader's": Scenario(
        limit=2,
        extra=KEYED + "max_parallel_per_key: \"{{ inputs.plan == 'pro' ? 2 : 1 }}\"\n",
        inputs=[
            {"customer": c, "plan": p}
            for c, p in [("a", "pro"), ("b", "pro"), ("a", "pro"), ("a", "free"), ("a", "pro")]
        ],
    ),
}


def made_alike(make_team: Callable[..., Team], make_workflow, scenario: Scenario, slug: str):
    team = make_team(slug, max_concurrent_executions=scenario.team_limit)
    if scenario.named is not None:
        named_limit_set(team=team, name="api", max=scenario.named)
    workflow = make_workflow(
        team, limit=scenario.limit, on_limit=scenario.on_limit, extra=scenario.extra
    )
    if scenario.paused:
        workflow_pause_set(workflow=workflow, paused=True)
    return team, workflow


def outcome(workflow: WorkflowDefinition) -> list[tuple[Any, ...]]:
    """Each execution of the workflow in FIFO order (as admitted) with what admission decided."""
    return list(
        Execution.objects.filter(workflow=workflow)
        .order_by("created_at", "id")
        .values_list(
            "inputs",
            "status",
            "blocked_by",
            "blocked_by_limit",
            "concurrency_key",
            "key_limit",
            "priority",
        )
    )


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_due_batch_is_decided_as_admissions_one_at_a_time(name, make_team, make_workflow):
    scenario = SCENARIOS[name]
    team, workflow = made_alike(make_team, make_workflow, scenario, "due")
    other, reference = made_alike(make_team, make_workflow, scenario, "one-by-one")
    run_at = timezone.now() - timedelta(seconds=1)
    for inputs in scenario.inputs:
        execution_schedule(team=team, workflow=workflow, run_at=run_at, inputs=inputs)
    assert scheduled_admit_due() == len(scenario.inputs)

    for inputs in scenario.inputs:
        with contextlib.suppress(ConcurrencyLimitExceeded):
            execution_admit(team=other, workflow=reference, inputs=inputs)
    # The one-by-one rejections are not rows; the due batch's rejected runs are failed rows.
    due = outcome(workflow)
    rejected = [row for row in due if row[1] == Status.FAILED]
    admitted = [row for row in due if row[1] != Status.FAILED]
    assert admitted == outcome(reference)
    assert len(rejected) == Rejection.objects.filter(workflow=workflow).count()
    assert Rejection.objects.filter(workflow=workflow).count() == (
        Rejection.objects.filter(workflow=reference).count()
    )


def test_a_run_whose_workflow_changed_is_checked_by_the_new_version(team, make_workflow):
    """Runs of a version applied since are admitted after the batch's others, through the
    inputs check of the new version: one it refuses fails."""
    workflow = make_workflow(team, limit=1, extra=KEYED)
    run_at = timezone.now() - timedelta(seconds=1)
    old = execution_schedule(team=team, workflow=workflow, run_at=run_at, inputs={"customer": "a"})
    make_workflow(
        team, limit=1, extra=KEYED.replace("type: string\n  plan", "type: number\n  plan")
    )
    assert scheduled_admit_due() == 1
    failed = Execution.objects.get(id=old.id)
    assert failed.status == Status.FAILED
    assert "customer" in failed.error


def test_a_batch_over_several_workflows_keeps_each_ones_order(team, make_workflow, monkeypatch):
    """Interleaved runs of two workflows break the tails: each is decided in the batch's order,
    and each workflow's queue is FIFO."""
    monkeypatch.setattr(scheduled, "BATCH", 7)
    first = make_workflow(team, "first", limit=1)
    second = make_workflow(team, "second", limit=2)
    run_at = timezone.now() - timedelta(seconds=1)
    ids = [
        execution_schedule(team=team, workflow=w, run_at=run_at).id
        for w in [first, second, first, first, second, second, second, first] * 3
    ]
    assert scheduled_admit_due() == len(ids)
    for workflow, holders in ((first, 1), (second, 2)):
        rows = list(Execution.objects.filter(workflow=workflow).order_by("created_at", "id"))
        assert [r.status for r in rows] == ["pending"] * holders + ["queued"] * (
            len(rows) - holders
        )
        assert all(r.blocked_by == "workflow" for r in rows[holders:])
        # In the order they were scheduled (created_at of a scheduled row breaks run_at ties).
        assert [r.id for r in rows] == [i for i in ids if i in {r.id for r in rows}]
