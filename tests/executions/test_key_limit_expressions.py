"""Per-key limits from an expression (docs/limits.md): checked at apply time with path and line,
evaluated once at admission and stored on the execution (a bad value is 400 `invalid_inputs`,
nothing written), and promotion admits each queued execution under the value it evaluated."""

from __future__ import annotations

import pytest

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from executions.services.promotion import queue_promote
from tests.factories import workflow_yaml
from workflows.schema import WorkflowInvalid, parse_workflow

pytestmark = pytest.mark.django_db

KEYED = 'inputs:\n  plan: {type: string}\nconcurrency_key: "{{ inputs.plan }}"\n'
BY_PLAN = "max_parallel_per_key: \"{{ inputs.plan == 'pro' ? 3 : 1 }}\"\n"
# The limit given as an input: a request can ask for a bad one.
GIVEN = 'inputs:\n  plan:\n  n:\nconcurrency_key: "{{ inputs.plan }}"\n' + (
    'max_parallel_per_key: "{{ inputs.n }}"\n'
)


def test_an_expression_is_kept_as_written():
    spec = parse_workflow(workflow_yaml(extra=KEYED + BY_PLAN))
    assert spec.max_parallel_per_key == "{{ inputs.plan == 'pro' ? 3 : 1 }}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"{{ steps.a.output }}"', '"steps" is not in scope here (only inputs and trigger)'),
        ('"{{ 0 }}"', "must be an integer from 1 to 2147483647, got 0"),
        ("\"{{ 'ten' }}\"", "must be an integer from 1 to 2147483647, got 'ten'"),
        ('"{{ inputs.plan +"', "must be an integer from 0 to 2147483647"),
    ],
)
def test_a_bad_expression_is_an_error_at_its_path_and_line(value, message):
    text = workflow_yaml(extra=KEYED + f"max_parallel_per_key: {value}\n")
    with pytest.raises(WorkflowInvalid) as caught:
        parse_workflow(text)
    (error,) = [str(e) for e in caught.value.errors]
    assert error.startswith("line 7: max_parallel_per_key: ")
    assert message in error


def test_a_newcomer_is_admitted_under_the_value_it_evaluated(team, make_workflow):
    workflow = make_workflow(team, extra=GIVEN)

    def admit(n: int) -> Execution:
        inputs = {"plan": "pro", "n": n}
        return execution_admit(team=team, workflow=workflow, inputs=inputs).execution

    first, second = admit(2), admit(2)
    assert (first.status, second.status, second.key_limit) == ("pending", "pending", 2)
    # Two hold the key: one that evaluated 3 fits, one that evaluated 2 or 1 does not.
    assert admit(3).status == "pending"
    blocked = admit(1)
    assert (blocked.status, blocked.blocked_by) == ("queued", "key")
    assert Execution.objects.get(id=blocked.id).key_limit == 1


def test_promotion_uses_each_queued_executions_stored_value(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, extra=GIVEN)

    def admit(n: int) -> Execution:
        inputs = {"plan": "pro", "n": n}
        return execution_admit(team=team, workflow=workflow, inputs=inputs).execution

    holders = [admit(3) for _ in range(3)]
    two, one = admit(2), admit(3)  # queued behind the full key, FIFO
    assert (two.status, one.status) == ("queued", "queued")
    with django_capture_on_commit_callbacks(execute=True):
        execution_finish(holders[0].id, status=Status.COMPLETED)
    # Two hold the key: the head evaluated 2, so it waits, and the next one waits behind it.
    assert Execution.objects.get(id=two.id).status == "queued"
    assert Execution.objects.get(id=two.id).blocked_by == "key"
    assert Execution.objects.get(id=one.id).status == "queued"
    execution_finish(holders[1].id, status=Status.COMPLETED)
    # This test's one transaction already ran its promotion after commit: promote again.
    queue_promote(team.id, trigger="completion")
    # One holds it: the head fits under its 2, and the next under its 3.
    assert Execution.objects.get(id=two.id).status == "pending"
    assert Execution.objects.get(id=one.id).status == "pending"
