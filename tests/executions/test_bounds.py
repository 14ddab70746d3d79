"""Bounded queues (docs/limits.md): max_queued rejects with queue_full and writes nothing;
queue_timeout ends a queued execution timed_out at the first poll past its deadline."""

from __future__ import annotations

from datetime import timedelta

import pytest

from executions.models import Execution, Rejection, Status
from executions.services import promotion
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit

pytestmark = pytest.mark.django_db(transaction=True)

KEYED = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'


def test_a_full_queue_rejects_and_writes_nothing(team, make_workflow):
    workflow = make_workflow(team, limit=1, extra="max_queued: 2\n")
    statuses = [execution_admit(team=team, workflow=workflow).status for _ in range(3)]
    assert statuses == ["pending", "queued", "queued"]
    with pytest.raises(ConcurrencyLimitExceeded) as caught:
        execution_admit(team=team, workflow=workflow)
    assert (caught.value.scope, caught.value.limit) == ("queue_full", 2)
    assert Execution.objects.count() == 3
    assert Rejection.objects.get().scope == "queue_full"


def test_a_keyed_queue_is_bounded_per_key(team, make_workflow):
    extra = KEYED + "max_parallel_per_key: 1\nmax_queued: 1\n"
    workflow = make_workflow(team, extra=extra)

    def admit(customer: str) -> str:
        inputs = {"customer": customer}
        try:
            return execution_admit(team=team, workflow=workflow, inputs=inputs).status
        except ConcurrencyLimitExceeded as exc:
            return exc.scope

    assert [admit(c) for c in ("a", "a", "a", "b", "b")] == [
        "pending",
        "queued",
        "queue_full",
        "pending",
        "queued",
    ]


def test_keep_latest_replaces_within_a_queue_of_one(team, make_workflow):
    workflow = make_workflow(team, limit=1, on_limit="keep_latest", extra="max_queued: 1\n")
    assert [execution_admit(team=team, workflow=workflow).status for _ in range(3)] == [
        "pending",
        "queued",
        "queued",
    ]


def test_a_queued_execution_past_its_timeout_ends_timed_out_at_the_next_poll(team, make_workflow):
    workflow = make_workflow(team, limit=1, extra="queue_timeout: 10m\n")
    running = execution_admit(team=team, workflow=workflow).execution
    late, fresh = (execution_admit(team=team, workflow=workflow).execution for _ in range(2))
    Execution.objects.filter(id=late.id).update(
        queued_at=late.queued_at - timedelta(minutes=10, seconds=1)
    )
    promotion.queue_promote_all(trigger="poller")
    late.refresh_from_db()
    assert (late.status, late.error) == ("timed_out", "queued longer than 10m")
    assert Execution.objects.get(id=fresh.id).status == Status.QUEUED
    assert Execution.objects.get(id=running.id).status == Status.PENDING
