"""Concurrency keys in admission and promotion (docs/limits.md): a limit per key value, FIFO per
key, what blocks a queued execution, and key locks that may collide without breaking a count."""

from __future__ import annotations

import itertools
import random

import pytest

from core import locks
from executions.models import Execution, Rejection, Status
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.lifecycle import execution_finish
from workflows.schema import InvalidInputs

pytestmark = pytest.mark.django_db

KEYED = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'


def keyed(make_workflow, team, *, per_key: int, limit: int = 0, on_limit: str = "queue"):
    extra = KEYED + f"max_parallel_per_key: {per_key}\n"
    return make_workflow(team, limit=limit, on_limit=on_limit, extra=extra)


def admit(team, workflow, customer: str):
    return execution_admit(team=team, workflow=workflow, inputs={"customer": customer})


def test_each_key_has_its_own_limit(team, make_workflow):
    workflow = keyed(make_workflow, team, per_key=2)
    a1, a2, a3, b1 = (admit(team, workflow, c) for c in ("a", "a", "a", "b"))
    assert [a1.status, a2.status, a3.status, b1.status] == [
        "pending",
        "pending",
        "queued",
        "pending",
    ]
    assert (a3.blocked_by, a3.blocked_by_name, a3.queue_position) == ("key", "a", 1)
    assert a3.execution.concurrency_key == "a"
    assert Execution.objects.get(id=b1.execution.id).concurrency_key == "b"


def test_a_newcomer_waits_behind_its_own_key_only(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = keyed(make_workflow, team, per_key=1)
    first = admit(team, workflow, "a")
    waiting = [admit(team, workflow, "a") for _ in range(3)]
    assert [w.queue_position for w in waiting] == [1, 2, 3]
    assert admit(team, workflow, "b").status == Status.PENDING
    with django_capture_on_commit_callbacks(execute=True):
        execution_finish(first.execution.id, status=Status.COMPLETED)
    # The oldest of the key was promoted, the others still wait for the key.
    statuses = [Execution.objects.get(id=w.execution.id).status for w in waiting]
    assert statuses == ["pending", "queued", "queued"]
    assert set(Execution.objects.filter(status="queued").values_list("blocked_by", flat=True)) == {
        "key"
    }


def test_the_workflow_limit_still_binds_across_keys(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = keyed(make_workflow, team, per_key=2, limit=3)
    results = [admit(team, workflow, c) for c in ("a", "b", "c", "d")]
    assert [r.status for r in results] == ["pending", "pending", "pending", "queued"]
    assert (results[3].blocked_by, results[3].blocked_by_name) == ("workflow", None)
    with django_capture_on_commit_callbacks(execute=True):
        execution_finish(results[0].execution.id, status=Status.COMPLETED)
    assert Execution.objects.get(id=results[3].execution.id).status == Status.PENDING


def test_a_full_key_rejects_with_its_scope_and_limit(team, make_workflow):
    workflow = keyed(make_workflow, team, per_key=1, on_limit="reject")
    admit(team, workflow, "a")
    with pytest.raises(ConcurrencyLimitExceeded) as caught:
        admit(team, workflow, "a")
    assert (caught.value.scope, caught.value.limit) == ("key", 1)
    assert admit(team, workflow, "b").status == Status.PENDING
    assert Rejection.objects.get().scope == "key"


def test_a_key_that_fails_at_admission_writes_nothing(team, make_workflow):
    untyped = 'inputs:\n  customer:\nconcurrency_key: "{{ inputs.customer }}"\n'
    workflow = make_workflow(team, extra=untyped)
    with pytest.raises(InvalidInputs) as caught:
        execution_admit(team=team, workflow=workflow, inputs={"customer": 7})
    assert str(caught.value) == "concurrency_key: must give a non-empty string, got int"
    assert not Execution.objects.exists()


def test_forced_admissions_hold_a_key_slot(team, make_workflow):
    workflow = keyed(make_workflow, team, per_key=1)
    forced = execution_admit(team=team, workflow=workflow, inputs={"customer": "a"}, force=True)
    assert forced.status == Status.PENDING
    assert admit(team, workflow, "a").status == Status.QUEUED


def colliding_keys(workflow_id: int) -> tuple[str, str]:
    """Two key values whose locks are the same 32-bit number: a birthday search over random
    values (~2^16 of them; CRC-32 never collides on short edits of one string)."""
    draw = random.Random(0)
    seen: dict[int | None, str] = {}
    for _ in itertools.count():
        value = f"{draw.getrandbits(64):016x}"
        lock = locks.key_lock_id(workflow_id, value)
        if lock in seen:
            return seen[lock], value
        seen[lock] = value
    raise AssertionError("unreachable")


def test_keys_whose_locks_collide_still_count_apart(team, make_workflow):
    workflow = keyed(make_workflow, team, per_key=1)
    first, second = colliding_keys(workflow.id)
    assert locks.key_lock_id(workflow.id, first) == locks.key_lock_id(workflow.id, second)
    assert admit(team, workflow, first).status == Status.PENDING
    assert admit(team, workflow, second).status == Status.PENDING
    assert admit(team, workflow, first).status == Status.QUEUED
    assert admit(team, workflow, second).status == Status.QUEUED


def test_key_locks_are_stable_and_unkeyed_takes_none():
    assert locks.key_lock_id(1, "acme") == locks.key_lock_id(1, "acme") == -1309298514
    assert locks.key_lock_id(2, "acme") != locks.key_lock_id(1, "acme")
    assert locks.key_lock_id(1, "") is None
