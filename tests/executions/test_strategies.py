"""on_limit cancel_running and keep_latest (docs/limits.md): decided inside the locked admission,
the superseded execution ended through the one terminal transition."""

from __future__ import annotations

import pytest

from executions.models import Execution, Status
from executions.services.admission import execution_admit

pytestmark = pytest.mark.django_db(transaction=True)

KEYED = (
    'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'
    "max_parallel_per_key: 1\n"
)


def admit(team, workflow, customer: str = "a"):
    return execution_admit(team=team, workflow=workflow, inputs={"customer": customer})


def row(admission) -> Execution:
    return Execution.objects.get(id=admission.execution.id)


def test_cancel_running_supersedes_the_oldest_holder_of_the_key(team, make_workflow):
    workflow = make_workflow(team, on_limit="cancel_running", extra=KEYED)
    first, other = admit(team, workflow), admit(team, workflow, "b")
    second = admit(team, workflow)
    assert (second.status, second.blocked_by) == ("pending", None)
    assert (row(first).status, row(first).error) == (
        "cancelled",
        f"superseded by {second.execution.id}",
    )
    assert row(other).status == Status.PENDING
    third = admit(team, workflow)
    assert row(second).error == f"superseded by {third.execution.id}"
    assert Execution.objects.filter(concurrency_key="a", status="pending").count() == 1


def test_cancel_running_unkeyed_supersedes_the_oldest_of_the_workflow(team, make_workflow):
    workflow = make_workflow(team, limit=2, on_limit="cancel_running")
    first, second = (execution_admit(team=team, workflow=workflow) for _ in range(2))
    third = execution_admit(team=team, workflow=workflow)
    assert third.status == Status.PENDING
    assert [row(first).status, row(second).status] == ["cancelled", "pending"]


def test_cancel_running_still_queues_behind_a_full_team(make_team, make_workflow):
    team = make_team(max_concurrent_executions=1)
    workflow = make_workflow(team, on_limit="cancel_running", extra=KEYED)
    first = admit(team, workflow)
    second = admit(team, workflow, "b")
    assert (second.status, second.blocked_by) == ("queued", "team")
    assert row(first).status == Status.PENDING


def test_keep_latest_keeps_one_queued_per_key(team, make_workflow):
    workflow = make_workflow(team, on_limit="keep_latest", extra=KEYED)
    running = admit(team, workflow)
    queued = admit(team, workflow)
    newer = admit(team, workflow)
    assert (newer.status, newer.queue_position, newer.blocked_by_name) == ("queued", 1, "a")
    assert (row(queued).status, row(queued).error) == (
        "cancelled",
        f"superseded by {newer.execution.id}",
    )
    assert row(running).status == Status.PENDING
    assert admit(team, workflow, "b").status == Status.PENDING
    assert Execution.objects.filter(status="queued").count() == 1
