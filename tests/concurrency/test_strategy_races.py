"""The strategies under concurrency (docs/limits.md): cancel_running racing completions, and
keep_latest and debounce floods on one key, with a sampler checking at every observation; without
locks a debounce flood leaves several waiting."""

from __future__ import annotations

import pytest

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from tests.concurrency.harness import CountSampler, KeySampler, run_in_threads
from tests.concurrency.test_admission_races import with_completions

pytestmark = pytest.mark.django_db(transaction=True)

KEYED = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'


class QueuedSampler(CountSampler):
    """Queued executions per key of one workflow: QueuedSampler(workflow_id)."""

    SQL = """
    SELECT concurrency_key, count(*) FROM executions_execution
     WHERE workflow_id = %s AND status = 'queued' GROUP BY concurrency_key
    """


def test_cancel_running_racing_completions_never_exceeds_a_key(make_team, make_workflow):
    team = make_team()
    workflow = make_workflow(
        team, on_limit="cancel_running", extra=KEYED + "max_parallel_per_key: 1\n"
    )
    watch = KeySampler(workflow.id)
    watch.start()
    jobs = [
        (
            lambda n=n: execution_admit(
                team=team, workflow=workflow, inputs={"customer": f"c{n // 40}"}
            )
        )
        for n in range(200)
    ]
    admissions = with_completions([workflow], lambda: run_in_threads(jobs, threads=16))
    watch.stop()
    rows = Execution.objects.filter(workflow=workflow)
    assert rows.count() == 200
    # Every newcomer is admitted (superseding its key's holder, or into the slot a completion
    # freed); none lost: each is a holder (at most one per key), completed, or cancelled by the
    # newer one that superseded it.
    assert {a.status for a in admissions} == {Status.PENDING}  # type: ignore[attr-defined]
    by_status = {s: rows.filter(status=s).count() for s in ("pending", "completed", "cancelled")}
    assert sum(by_status.values()) == 200
    assert by_status["pending"] <= 5
    for cancelled in rows.filter(status="cancelled"):
        superseder = rows.get(id=cancelled.error.removeprefix("superseded by "))
        assert superseder.concurrency_key == cancelled.concurrency_key
        assert superseder.created_at > cancelled.created_at
    assert watch.samples > 20
    assert max(watch.most_per_group.values()) == 1
    worst = max(watch.most_per_group.values())
    print(
        f"\ncancel_running x200 over 5 keys: max holders per key {worst} in {watch.samples}"
        f" samples; {by_status}"
    )


def flood_one_key(team, workflow, *, admissions: int) -> QueuedSampler:
    """`admissions` concurrent admissions of the key "a" on 16 threads, sampled throughout."""
    watch = QueuedSampler(workflow.id)
    watch.start()
    jobs = [
        (lambda: execution_admit(team=team, workflow=workflow, inputs={"customer": "a"}))
        for _ in range(admissions)
    ]
    run_in_threads(jobs, threads=16)
    return watch.stop()


def test_a_keep_latest_flood_keeps_one_queued_and_runs_the_last(make_team, make_workflow):
    team = make_team()
    workflow = make_workflow(
        team, on_limit="keep_latest", extra=KEYED + "max_parallel_per_key: 1\n"
    )
    running = execution_admit(team=team, workflow=workflow, inputs={"customer": "a"}).execution
    watch = flood_one_key(team, workflow, admissions=100)
    assert watch.samples > 20
    assert watch.most_per_group == {"a": 1}
    last = Execution.objects.filter(workflow=workflow).latest("created_at")
    assert Execution.objects.get(status=Status.QUEUED) == last
    assert Execution.objects.filter(status=Status.CANCELLED).count() == 99
    execution_finish(running.id, status=Status.COMPLETED)  # promotes after its commit
    assert Execution.objects.get(id=last.id).status == Status.PENDING
    print(f"\nkeep_latest x100 on one key: at most {watch.most} queued in {watch.samples} samples")


def test_a_debounce_flood_keeps_the_last_waiting_and_supersedes_the_rest(make_team, make_workflow):
    """The issue's 20 executions of one key, at once: each newcomer supersedes the one waiting
    before it under the key's lock. (Their promotion when due: tests/executions/test_debounce.)"""
    team = make_team()
    workflow = make_workflow(team, extra=KEYED + "debounce: 1m\n")
    watch = flood_one_key(team, workflow, admissions=20)
    assert watch.samples > 20
    assert watch.most_per_group == {"a": 1}
    rows = Execution.objects.filter(workflow=workflow)
    last = rows.latest("created_at")
    assert rows.get(status=Status.QUEUED) == last
    for cancelled in rows.filter(status=Status.CANCELLED):
        superseder = rows.get(id=cancelled.error.removeprefix("superseded by "))
        assert superseder.created_at > cancelled.created_at
    assert rows.filter(status=Status.CANCELLED).count() == 19
    print(f"\ndebounce x20 on one key: at most {watch.most} waiting in {watch.samples} samples")


def test_without_locks_a_debounce_flood_leaves_several_waiting(
    make_team, make_workflow, without_locks
):
    """Proof that the test above catches the bug: without locks newcomers miss each other."""
    team = make_team()
    workflow = make_workflow(team, extra=KEYED + "debounce: 1m\n")
    flood_one_key(team, workflow, admissions=20)
    waiting = Execution.objects.filter(workflow=workflow, status=Status.QUEUED).count()
    print(f"\nwithout locks: {waiting} of 20 left waiting on one key (1 with locks)")
    assert waiting > 1
