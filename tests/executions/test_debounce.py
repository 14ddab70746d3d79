"""Debounce (docs/limits.md): an execution is admitted queued (`blocked_by: "debounce"`) and
promoted once `debounce` passes with no newer execution of its key, which supersedes it; then
every other limit applies. The real engine clock promotes it when it is due."""

from __future__ import annotations

import itertools
import time

import pytest

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish

pytestmark = pytest.mark.django_db(transaction=True)

KEYED = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'


def wait_until_nothing_queued(seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while Execution.objects.filter(status="queued").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_burst_of_one_key_runs_once_a_debounce_after_the_last(team, make_workflow, engine_clock):
    workflow = make_workflow(team, extra=KEYED + "debounce: 1s\n")
    admitted = []
    for _ in range(20):
        admission = execution_admit(team=team, workflow=workflow, inputs={"customer": "acme"})
        assert (admission.status, admission.blocked_by) == ("queued", "debounce")
        admitted.append(admission.execution)
        time.sleep(0.1)
    other = execution_admit(team=team, workflow=workflow, inputs={"customer": "globex"})
    wait_until_nothing_queued()
    rows = {e.id: e for e in Execution.objects.all()}
    last = rows[admitted[-1].id]
    assert last.status == Status.PENDING
    delay = (last.pending_at - last.created_at).total_seconds()
    print(f"\ndebounce 1s: the last of 20 started {delay:.3f} s after its admission")
    assert 1 <= delay < 2
    for older, newer in itertools.pairwise(admitted):
        row = rows[older.id]
        assert (row.status, row.error) == ("cancelled", f"superseded by {newer.id}")
    assert rows[other.execution.id].status == Status.PENDING  # another key is debounced apart


def test_once_due_it_waits_for_every_other_limit(team, make_workflow, engine_clock):
    workflow = make_workflow(team, limit=1, extra="debounce: 300ms\n")
    first = execution_admit(team=team, workflow=workflow).execution
    wait_until_nothing_queued()
    second = execution_admit(team=team, workflow=workflow).execution
    time.sleep(0.8)
    second.refresh_from_db()
    assert (second.status, second.blocked_by, second.not_before) == ("queued", "workflow", None)
    execution_finish(first.id, status=Status.COMPLETED)
    second.refresh_from_db()
    assert second.status == Status.PENDING


def test_a_forced_execution_is_not_debounced(team, make_workflow):
    workflow = make_workflow(team, extra="debounce: 1m\n")
    assert execution_admit(team=team, workflow=workflow, force=True).status == "pending"
