from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from executions.models import Execution, QueueSample, StepExecution
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.engine.test_steps import max_overlap
from workflows.models import WorkflowDefinition

NAP = """
name: nap
max_parallel_executions: 1
steps:
  - name: nap
    action: test/sleep
    params: {seconds: "{{ inputs.seconds }}"}
inputs:
  seconds: {type: number, default: 0}
"""


def test_a_killed_worker_is_reaped_and_the_queue_moves_on(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply(NAP)
    doomed, waiting = run(workflow, seconds=60), run(workflow, seconds=0)
    assert waiting.status == "queued"
    step = wait_for(
        lambda: StepExecution.objects.filter(execution=doomed, status="running").first()
    )
    pid = int(step.lease_owner.split(":")[1])
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_terminal(doomed)
    recovered = time.monotonic() - killed
    step.refresh_from_db()
    assert (doomed.status, step.status) == ("failed", "failed")
    assert step.error.startswith("lease expired: worker")
    assert wait_terminal(waiting).status == "completed"
    print(f"kill -9 -> execution failed and slot freed after {recovered:.2f}s")
    assert recovered < 6  # lease 2 s + reaper 0.5 s + slack


def test_30_executions_with_a_limit_of_2_run_two_at_a_time_in_fifo_order(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply(NAP.replace("max_parallel_executions: 1", "max_parallel_executions: 2"))
    admitted = [run(workflow, seconds=0.1) for _ in range(30)]
    for execution in admitted:
        wait_terminal(execution, timeout=60)
    done = list(Execution.objects.filter(workflow=workflow).order_by("created_at"))
    assert [e.status for e in done] == ["completed"] * 30
    assert max_overlap([(e.started_at, e.completed_at) for e in done]) == 2
    # FIFO is the order of promotion; two executions promoted together may start either way.
    promoted = [e for e in done if e.promoted_at is not None]
    assert len(promoted) >= 20  # most waited in the queue
    assert sorted(promoted, key=lambda e: e.promoted_at) == promoted


def test_the_engine_runs_end_to_end_on_the_redis_broker(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine(broker="redis://127.0.0.1:6379/7")
    workflow = apply(NAP.replace("max_parallel_executions: 1", "max_parallel_executions: 2"))
    executions = [run(workflow, seconds=0.2) for _ in range(4)]
    assert [e.status for e in executions] == ["pending", "pending", "queued", "queued"]
    for execution in executions:
        assert wait_terminal(execution).status == "completed"


def test_the_schedules_sample_queue_depth_for_the_dashboard(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    workflow = apply(NAP)
    run(workflow, seconds=120)
    run(workflow, seconds=0)
    engine()
    # django-q2's scheduler first looks at the schedules 30 s after its cluster starts.
    sample = wait_for(
        lambda: QueueSample.objects.filter(workflow=workflow, queued=1).first(), timeout=60
    )
    assert sample.running == 1
