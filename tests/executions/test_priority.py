"""Priority (docs/limits.md): a queue is promoted highest first, FIFO among equals; a newcomer
never overtakes an equal or higher priority; positions are places in that order."""

from __future__ import annotations

import pytest
from django.db import transaction

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from workflows.schema import InvalidInputs

pytestmark = pytest.mark.django_db

URGENT = (
    'inputs:\n  urgent: {type: boolean, default: false}\npriority: "{{ inputs.urgent ? 5 : 0 }}"\n'
)


def test_a_queue_is_promoted_highest_priority_first_fifo_among_equals(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1)
    holder = execution_admit(team=team, workflow=workflow).execution
    admitted = [
        (name, execution_admit(team=team, workflow=workflow, priority=priority))
        for name, priority in [("low-1", 0), ("mid", 5), ("low-2", 0), ("top", 9), ("mid-2", 5)]
    ]
    # Each newcomer's place when admitted: behind every equal or higher priority.
    assert [(name, a.queue_position) for name, a in admitted] == [
        ("low-1", 1),
        ("mid", 1),
        ("low-2", 3),
        ("top", 1),
        ("mid-2", 3),
    ]
    names = {a.execution.id: name for name, a in admitted}
    order = []
    running = holder.id
    for _ in admitted:
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            execution_finish(running, status=Status.COMPLETED)
        running = Execution.objects.get(workflow=workflow, status=Status.PENDING).id
        order.append(names[running])
    assert order == ["top", "mid", "mid-2", "low-1", "low-2"]


def test_the_priority_may_be_an_expression_of_the_inputs(team, make_workflow):
    workflow = make_workflow(team, extra=URGENT)
    urgent = execution_admit(team=team, workflow=workflow, inputs={"urgent": True})
    assert urgent.execution.priority == 5
    assert execution_admit(team=team, workflow=workflow).execution.priority == 0
    assert Execution.objects.get(id=urgent.execution.id).priority == 5


def test_a_given_priority_overrides_the_workflows(team, make_workflow):
    workflow = make_workflow(team, extra=URGENT)
    admitted = execution_admit(team=team, workflow=workflow, inputs={"urgent": True}, priority=2)
    assert admitted.execution.priority == 2


def test_a_priority_expression_outside_0_to_9_writes_nothing(team, make_workflow):
    workflow = make_workflow(team, extra='inputs:\n  p:\npriority: "{{ inputs.p }}"\n')
    for bad in (10, -1, "5", True):
        with pytest.raises(InvalidInputs) as caught:
            execution_admit(team=team, workflow=workflow, inputs={"p": bad})
        assert str(caught.value).startswith("priority: must be an integer from 0 to 9")
    assert not Execution.objects.exists()
