"""Per-key limits under concurrency (docs/limits.md): 200 admissions over 20 keys racing each other
and completions, in threads and in processes, a sampler checking every key and the workflow at
every observation; and the same flood without locks, which the sampler catches."""

from __future__ import annotations

import multiprocessing

import pytest
from django.db import connections

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from teams.models import Team
from tests.concurrency.harness import KeySampler, run_in_threads, status_or_deadlock
from tests.concurrency.test_admission_races import drain, with_completions

pytestmark = pytest.mark.django_db(transaction=True)

KEYS, PER_KEY, LIMIT, ADMISSIONS = 20, 2, 10, 200
KEYED = (
    'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'
    f"max_parallel_per_key: {PER_KEY}\n"
)


def keyed_workflow(make_workflow, team, limit: int = LIMIT):
    return make_workflow(team, limit=limit, extra=KEYED)


def admit(team: Team, workflow, n: int) -> str:
    """The n-th admission of the flood: keys come in bursts of ten, as a customer's webhooks do,
    so admissions of one key race each other."""
    inputs = {"customer": f"c{n * KEYS // ADMISSIONS}"}
    return status_or_deadlock(
        lambda: execution_admit(team=team, workflow=workflow, inputs=inputs).execution.status
    )


def flood_threads(team: Team, workflow) -> list[str]:
    jobs = [(lambda n=n: admit(team, workflow, n)) for n in range(ADMISSIONS)]
    return with_completions([workflow], lambda: run_in_threads(jobs, threads=16))


def assert_fifo_per_key(workflow) -> None:
    for n in range(KEYS):
        promoted = list(
            Execution.objects.filter(
                workflow=workflow, concurrency_key=f"c{n}", queued_at__isnull=False
            )
            .order_by("created_at")
            .values_list("promoted_at", flat=True)
        )
        assert all(at is not None for at in promoted)
        assert promoted == sorted(promoted), f"key c{n}: a later execution was promoted first"


@pytest.mark.parametrize("limit", [LIMIT, 0], ids=["workflow-limit-10", "keys-only"])
def test_per_key_and_workflow_limits_hold_under_a_flood(make_team, make_workflow, limit):
    team = make_team()
    workflow = keyed_workflow(make_workflow, team, limit)
    watch = KeySampler(workflow.id)
    watch.start()
    outcomes = flood_threads(team, workflow)
    drain([workflow])
    watch.stop()
    assert set(outcomes) <= {"pending", "queued"}
    assert Execution.objects.filter(workflow=workflow).count() == ADMISSIONS
    assert watch.samples > 20
    assert len(watch.most_per_group) == KEYS
    assert max(watch.most_per_group.values()) == PER_KEY
    assert 0 < watch.most <= (limit or KEYS * PER_KEY)
    assert_fifo_per_key(workflow)
    print(
        f"\nkeys: max holders per key {max(watch.most_per_group.values())} (limit {PER_KEY}),"
        f" per workflow {watch.most} (limit {limit})"
        f" in {watch.samples} samples"
    )


def test_without_locks_the_same_flood_breaks_a_limit(make_team, make_workflow, without_locks):
    """Proof that the test catches the bug: without locks a limit it checks is exceeded."""
    team = make_team()
    workflow = keyed_workflow(make_workflow, team)
    watch = KeySampler(workflow.id)
    watch.start()
    flood_threads(team, workflow)
    watch.stop()
    worst, workflow_max = max(watch.most_per_group.values()), watch.most
    print(
        f"\nwithout locks: max holders per key {worst} (limit {PER_KEY}),"
        f" per workflow {workflow_max} (limit {LIMIT})"
    )
    assert worst > PER_KEY or workflow_max > LIMIT


def _admit_in_child(team_id: int, workflow_id: int, numbers: range, results) -> None:  # type: ignore[no-untyped-def]
    from workflows.models import WorkflowDefinition

    connections.close_all()
    team = Team.objects.get(id=team_id)
    workflow = WorkflowDefinition.objects.select_related("current_version").get(id=workflow_id)
    for n in numbers:
        results.put(admit(team, workflow, n))
    connections.close_all()


def test_per_key_limits_hold_across_processes(make_team, make_workflow):
    team = make_team()
    workflow = keyed_workflow(make_workflow, team)
    connections.close_all()  # children are forked: they must not share our connection
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    watch = KeySampler(workflow.id)
    watch.start()
    share = ADMISSIONS // 4
    children = [
        context.Process(
            target=_admit_in_child,
            args=(team.id, workflow.id, range(i * share, (i + 1) * share), results),
        )
        for i in range(4)
    ]

    def run() -> None:
        for child in children:
            child.start()
        for child in children:
            child.join(timeout=120)
            assert child.exitcode == 0

    with_completions([workflow], run)
    outcomes = [results.get(timeout=5) for _ in range(ADMISSIONS)]
    drain([workflow])
    watch.stop()
    assert set(outcomes) <= {Status.PENDING, Status.QUEUED}
    assert Execution.objects.filter(workflow=workflow).count() == ADMISSIONS
    assert max(watch.most_per_group.values()) <= PER_KEY
    assert 0 < watch.most <= LIMIT
    assert_fifo_per_key(workflow)
