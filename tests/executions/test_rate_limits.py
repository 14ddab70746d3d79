"""Rate limits (docs/limits.md): a rejecting workflow over its rate says when to retry; a rate per
key; the schema. (The burst against a rate, racing the engine clock's promotions:
tests/concurrency/test_rate_races.py.)"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from tests.factories import workflow_yaml
from workflows.schema import WorkflowInvalid, parse_workflow

pytestmark = pytest.mark.django_db(transaction=True)


def rated(make_workflow, team, *, on_limit: str = "queue", max_: int = 10, period: str = "1s"):
    extra = f"rate_limit: {{max: {max_}, period: {period}}}\n"
    return make_workflow(team, "rated", on_limit=on_limit, extra=extra)


def test_a_rejecting_workflow_says_when_to_retry(team, make_workflow):
    workflow = rated(make_workflow, team, on_limit="reject", max_=2, period="2s")
    first = execution_admit(team=team, workflow=workflow).execution
    execution_admit(team=team, workflow=workflow)
    with pytest.raises(ConcurrencyLimitExceeded) as caught:
        execution_admit(team=team, workflow=workflow)
    rejected = caught.value
    assert (rejected.scope, rejected.limit) == ("rate", 2)
    real_wait = (first.created_at + timedelta(seconds=2) - timezone.now()).total_seconds()
    assert abs(rejected.retry_after - real_wait) <= 1
    assert Execution.objects.count() == 2
    time.sleep(rejected.retry_after)
    assert execution_admit(team=team, workflow=workflow).status == "pending"


def test_a_rate_per_key_counts_each_key_apart(team, make_workflow):
    extra = (
        'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'
        "rate_limit: {max: 1, period: 1m, per_key: true}\n"
    )
    workflow = make_workflow(team, "rated", extra=extra)

    def admit(customer: str) -> str:
        inputs = {"customer": customer}
        return execution_admit(team=team, workflow=workflow, inputs=inputs).status

    assert [admit(c) for c in ("a", "b", "a")] == ["pending", "pending", "queued"]


@pytest.mark.parametrize(
    ("rate", "path", "message"),
    [
        ("{max: 0, period: 1s}", "rate_limit.max", "must be an integer from 1 to 2147483647"),
        ("{max: 5}", "rate_limit.period", "is required"),
        ("{max: 5, period: 1s, per_key: true}", "rate_limit.per_key", "concurrency_key"),
        ("{max: 5, period: 1s, burst: 2}", "rate_limit.burst", 'unknown key "burst"'),
    ],
)
def test_a_bad_rate_limit_is_an_error_at_its_path(rate, path, message):
    with pytest.raises(WorkflowInvalid) as caught:
        parse_workflow(workflow_yaml("w", extra=f"rate_limit: {rate}\n"))
    (error,) = caught.value.errors
    assert (error.path, error.line) == (path, 4)
    assert message in error.message
