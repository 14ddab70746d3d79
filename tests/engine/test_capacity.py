"""Engine capacity (docs/architecture.md, The worker model), against real step-worker processes: a
step waiting on I/O holds a slot, not a process; a worker never runs more than its slots; a retry's
backoff holds nothing; a killed worker's steps are reaped and retried, never run twice at once."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from executions.models import SLOT_HOLDING, Execution, StepExecution
from tests.concurrency.harness import CountSampler
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.engine.test_steps import max_overlap
from tests.processes import Cluster
from workflows.models import WorkflowDefinition


def fanout(count: int, *, seconds: float, max_parallel: int = 0, extra: str = "") -> str:
    return f"""
name: fanout-{count}
{extra}
steps:
  - name: each
    action: test/sleep
    for_each: "{{{{ {list(range(count))} }}}}"
    max_parallel: {max_parallel}
    params: {{seconds: {seconds}}}
"""


def branches(execution: Execution) -> list[StepExecution]:
    return list(StepExecution.objects.filter(execution=execution, fanout_index__isnull=False))


def test_200_sleeping_steps_run_at_once_in_one_worker_process(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine(workers=1, slots=200)
    execution = wait_terminal(run(apply(fanout(200, seconds=3))), timeout=60)
    assert execution.status == "completed", execution.error
    done = branches(execution)
    assert len(done) == 200
    assert max_overlap([(b.started_at, b.completed_at) for b in done]) == 200


def test_max_parallel_20_over_100_branches_never_exceeds_20_and_reaches_it(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    execution = wait_terminal(run(apply(fanout(100, seconds=0.5, max_parallel=20))), timeout=90)
    assert execution.status == "completed", execution.error
    done = branches(execution)
    assert len(done) == 100
    assert max_overlap([(b.started_at, b.completed_at) for b in done]) == 20


class RunningSampler(CountSampler):
    """Running steps per lease owner (worker process)."""

    SQL = """
    SELECT lease_owner, count(*) FROM executions_stepexecution
     WHERE status = 'running' AND lease_owner <> '' GROUP BY lease_owner
    """
    pause = 0.02


def test_two_workers_of_10_slots_never_run_more_than_20_and_both_take_work(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine(workers=2, slots=10)
    sampler = RunningSampler()
    sampler.start()
    try:
        execution = wait_terminal(run(apply(fanout(80, seconds=1))), timeout=90)
    finally:
        sampler.stop()
    assert execution.status == "completed", execution.error
    assert sampler.samples > 50
    print(f"most running {sampler.most}, per worker {sorted(sampler.most_per_group.values())}")
    assert sampler.most == 20
    assert len(sampler.most_per_group) == 2
    assert max(sampler.most_per_group.values()) == 10


def test_a_worker_killed_holding_50_steps_has_them_retried_once_each_and_the_queue_promoted(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine(workers=1, slots=50)
    workflow = apply(
        fanout(50, seconds=3, extra="max_parallel_executions: 1").replace(
            "params:", "retry: {max_attempts: 2}\n    params:"
        )
    )
    doomed, waiting = run(workflow), run(workflow)
    assert waiting.status == "queued"
    running = wait_for(
        lambda: (
            rows
            if len(rows := branches(doomed)) == 50 and all(b.status == "running" for b in rows)
            else None
        ),
        timeout=30,
    )
    owners = {step.lease_owner for step in running}
    assert len(owners) == 1
    leases = {step.id: step.lease_expires_at for step in running}
    os.kill(int(owners.pop().split(":")[1]), signal.SIGKILL)

    assert wait_terminal(doomed, timeout=60).status == "completed", doomed.error
    retried = branches(doomed)
    assert [b.attempt for b in retried] == [2] * 50
    assert all(b.status == "completed" for b in retried)
    # Attempt 2 of each step started only after attempt 1's lease ran out: never two at once.
    assert all(b.started_at >= leases[b.id] for b in retried)
    # The slot was freed and the queue promoted.
    assert wait_terminal(waiting, timeout=60).status == "completed"
    assert not Execution.objects.filter(workflow=workflow, status__in=SLOT_HOLDING).exists()


def test_a_step_waiting_for_its_retry_holds_no_slot(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine(workers=1, slots=1)
    flaky = apply("""
name: flaky
steps:
  - name: fail
    action: test/fail
    retry: {max_attempts: 4, backoff: exponential}
""")
    quick = apply("name: quick\nsteps:\n  - name: only\n    action: test/noop\n")
    failing = run(flaky)
    wait_for(lambda: StepExecution.objects.filter(execution=failing, attempt=2).exists())
    # The one slot of the cluster is free while `fail` waits 1 s, 2 s, 4 s between attempts.
    other = wait_terminal(run(quick), timeout=30)
    assert other.status == "completed"
    assert wait_terminal(failing, timeout=30).status == "failed"
    last_attempt = StepExecution.objects.get(execution=failing)
    assert last_attempt.attempt == 4
    assert other.completed_at < last_attempt.started_at
