from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from django.db import connection
from django.utils import timezone

from executions.models import Execution, StepExecution
from executions.services.lifecycle import execution_cancel
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.factories import KEYED
from workflows.models import WorkflowDefinition


def max_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, change in events:  # at equal times an end (-1) sorts before a start (+1)
        running += change
        peak = max(peak, running)
    return peak


FANOUT = """
name: fanout
steps:
  - name: each
    action: test/sleep
    for_each: "{{ inputs.items }}"
    max_parallel: 3
    params: {seconds: 0.3, item: "{{ item }}"}
  - name: after
    action: test/echo
    params: {outputs: "{{ steps['each'].output }}"}
    depends_on: [each]
inputs:
  items: {type: string, default: ""}
"""


def test_a_fanout_of_20_never_runs_more_than_max_parallel_branches(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply(FANOUT.replace('"{{ inputs.items }}"', str(list(range(20)))))
    execution = wait_terminal(run(workflow), timeout=40)
    assert execution.status == "completed", execution.error
    branches = StepExecution.objects.filter(execution=execution, fanout_index__isnull=False)
    intervals = [(b.started_at, b.completed_at) for b in branches]
    assert len(intervals) == 20
    assert max_overlap(intervals) == 3  # the cap holds, and is used
    after = StepExecution.objects.get(execution=execution, name="after")
    assert [o["slept"] for o in after.output["outputs"]] == [0.3] * 20


def test_a_false_if_skips_the_step_and_its_dependants_still_run_seeing_it_skipped(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    # Upstream's rule (docs/workflows.md): a skipped step counts as resolved.
    engine()
    workflow = apply("""
name: skipping
inputs:
  go: {type: boolean, default: false}
steps:
  - name: maybe
    action: test/noop
    if: "{{ inputs.go }}"
  - name: then
    action: test/echo
    depends_on: [maybe]
    params: {saw: "{{ steps.maybe.status }}", error: "{{ steps.maybe.error }}"}
  - name: always
    action: test/echo
    params: {go: "{{ inputs.go }}"}
""")
    execution = wait_terminal(run(workflow))
    assert execution.status == "completed", execution.error
    rows = StepExecution.objects.filter(execution=execution)
    statuses = dict(rows.values_list("name", "status"))
    assert statuses == {"maybe": "skipped", "then": "completed", "always": "completed"}
    assert rows.get(name="then").output == {"saw": "skipped", "error": ""}


def test_a_failure_with_continue_on_error_lets_its_dependants_run(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply("""
name: tolerant
steps:
  - name: optional
    action: test/fail
    params: {message: "cache warm-up failed"}
    continue_on_error: true
  - name: main
    action: test/echo
    params: {ran: true}
    depends_on: [optional]
""")
    execution = wait_terminal(run(workflow))
    assert execution.status == "completed", execution.error
    steps = {s.name: s for s in StepExecution.objects.filter(execution=execution)}
    assert (steps["optional"].status, steps["optional"].error) == ("failed", "cache warm-up failed")
    assert (steps["main"].status, steps["main"].output) == ("completed", {"ran": True})


def test_a_step_over_its_timeout_fails_and_fails_the_execution(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply("""
name: slow-step
steps:
  - name: slow
    action: test/sleep
    params: {seconds: 30}
    timeout: 1s
""")
    execution = wait_terminal(run(workflow))
    step = StepExecution.objects.get(execution=execution)
    assert (execution.status, step.status) == ("failed", "failed")
    assert step.error == "timed out after 1s"
    # Stopped after its timeout and before its 30 s sleep would have ended.
    assert 1 <= (step.completed_at - step.started_at).total_seconds() < 30


def test_a_workflow_over_its_timeout_ends_timed_out(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply("""
name: slow-workflow
timeout: 1s
steps:
  - name: first
    action: test/sleep
    params: {seconds: 0.5}
  - name: second
    action: test/sleep
    params: {seconds: 30}
    depends_on: [first]
""")
    execution = wait_terminal(run(workflow))
    assert execution.status == "timed_out"
    assert execution.error == "workflow timed out after 1s"
    # Ended after its timeout and before its second step's 30 s sleep would have.
    assert 1 <= (execution.completed_at - execution.started_at).total_seconds() < 30
    second = wait_for(
        lambda: (
            StepExecution.objects.filter(execution=execution, name="second")
            .exclude(status="running")
            .first()
        )
    )
    assert second.status == "cancelled"


def test_cancelling_stops_a_running_sleep_frees_the_slot_and_promotes_the_next(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply("""
name: cancellable
max_parallel_executions: 1
steps:
  - name: nap
    action: test/sleep
    params: {seconds: 30}
""")
    first, second = run(workflow), run(workflow)
    assert second.status == "queued"
    wait_for(lambda: StepExecution.objects.filter(execution=first, status="running").exists())
    cancelled_at = timezone.now()
    execution_cancel(first.id)
    stopped_after = seconds_until_its_step_stops(first, since=cancelled_at)
    assert stopped_after <= 1.2, stopped_after
    wait_for(lambda: StepExecution.objects.filter(execution=second, status="running").exists())
    assert Execution.objects.get(id=first.id).status == "cancelled"
    execution_cancel(second.id)


def test_a_superseded_execution_stops_its_running_sleep_and_the_newcomer_runs(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply(
        "name: latest-wins\non_limit: cancel_running\nmax_parallel_per_key: 1\n"
        + KEYED
        + "steps:\n  - name: nap\n    action: test/sleep\n    params: {seconds: 30}\n"
    )
    old = run(workflow, customer="acme")
    wait_for(lambda: StepExecution.objects.filter(execution=old, status="running").exists())
    superseded_at = timezone.now()
    newcomer = run(workflow, customer="acme")
    assert newcomer.status == "pending"
    stopped_after = seconds_until_its_step_stops(old, since=superseded_at)
    print(f"\nthe superseded execution's 30 s sleep stopped {stopped_after:.2f} s after")
    assert stopped_after < 5, stopped_after  # well before the 30 s sleep would have ended
    old.refresh_from_db()
    assert (old.status, old.error) == ("cancelled", f"superseded by {newcomer.id}")
    wait_for(lambda: StepExecution.objects.filter(execution=newcomer, status="running").exists())
    execution_cancel(newcomer.id)


def seconds_until_its_step_stops(execution: Execution, *, since: datetime) -> float:
    """How long after `since` the execution's running step ended cancelled."""
    step = wait_for(
        lambda: StepExecution.objects.filter(execution=execution, status="cancelled").first(),
        timeout=5,
    )
    return (step.completed_at - since).total_seconds()


def test_an_expression_error_fails_the_step_naming_the_expression(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply("""
name: bad-expression
inputs:
  missing: {default: null}  # declared (validation checks names), null at run time
steps:
  - name: broken
    action: test/echo
    params: {value: "{{ inputs.missing + 1 }}"}
""")
    execution = wait_terminal(run(workflow))
    step = StepExecution.objects.get(execution=execution)
    assert step.status == "failed"
    assert 'expression "inputs.missing + 1" failed' in step.error
    assert execution.error.startswith("step 'broken' failed")


def test_time_from_admission_to_running_on_an_idle_cluster(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply("name: quick\nsteps:\n  - name: only\n    action: test/noop\n")
    wait_terminal(run(workflow))  # warm the workers
    latencies = []
    for _ in range(50):
        admitted = time.monotonic()
        execution = run(workflow)
        wait_for(
            lambda e=execution: (
                Execution.objects.filter(id=e.id).exclude(status="pending").exists()
            ),
            interval=0.005,
        )
        latencies.append(time.monotonic() - admitted)
        wait_terminal(execution)
    latencies.sort()
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
    print(f"admit -> running: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    assert p99 < 1.0


def listening_backends() -> set[int]:
    """The backends of the step workers' LISTEN connections to the test database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        )
        return {pid for (pid,) in cursor.fetchall()}


def test_a_worker_whose_listening_connection_is_cut_listens_again_and_runs_work(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine(workers=1)
    workflow = apply("name: quick\nsteps:\n  - name: only\n    action: test/noop\n")
    assert wait_terminal(run(workflow)).status == "completed"
    # A backend's `query` is its last statement: a connection being opened shows another one
    # for a moment, so each count is awaited, not sampled once.
    wait_for(lambda: len(listening_backends()) == 1)
    (before,) = listening_backends()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [before])
    wait_for(lambda: len(listening_backends() - {before}) == 1)
    assert wait_terminal(run(workflow)).status == "completed"


def test_an_output_over_the_limit_fails_the_step_naming_it(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    workflow = apply("""
name: big-output
inputs:
  blob: {type: string, default: ""}
steps:
  - name: echo
    action: test/echo
    params: {blob: "{{ inputs.blob }}"}
""")
    small = wait_terminal(run(workflow, blob="x" * 1000))
    big = wait_terminal(run(workflow, blob="x" * (1024 * 1024)))
    assert small.status == "completed", small.error
    step = StepExecution.objects.get(execution=big)
    assert (big.status, step.status, step.output) == ("failed", "failed", None)
    assert step.error == (
        f"the output is {1024 * 1024 + 12} bytes, over limits.step_output_bytes (1048576)"
    )
