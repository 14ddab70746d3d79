"""No poison execution (docs/hostile-input.md): whatever an execution or a step raises in the
engine fails that execution, with the error recorded, and never the worker; an execution whose
workers keep dying is quarantined. Meanwhile another team's executions run."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

from executions.models import Execution, StepExecution
from teams.services import team_create
from tests.engine.conftest import run, wait_for, wait_terminal
from workflows.models import WorkflowDefinition, WorkflowVersion
from workflows.services import workflow_apply

NOOP = "name: other\nsteps:\n  - name: only\n    action: test/noop\n"


def other_team_workflow() -> WorkflowDefinition:
    team = team_create(slug=f"b-{uuid.uuid4().hex[:8]}")
    return workflow_apply(team=team, content=NOOP).workflow


def cluster_pids(cluster: object) -> set[int]:
    """The processes of the cluster's process group: the serve, its step workers, its clock."""
    group = cluster.process.pid  # type: ignore[attr-defined]
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # the stat's pgrp
            pids.add(int(stat.parent.name))
    return pids


def test_an_execution_whose_deadline_raises_fails_and_the_workers_run_on(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    cluster = engine()
    poisoned = apply("name: poison\ntimeout: 1h\nsteps:\n  - name: only\n    action: test/noop\n")
    # A version stored before the bounds (docs/hostile-input.md): its deadline overflows datetime.
    version = WorkflowVersion.objects.get(workflow=poisoned)
    version.spec = {**version.spec, "timeout": 99999999999 * 3600.0}
    version.save(update_fields=["spec"])
    other = other_team_workflow()
    first = wait_terminal(run(other))  # the workers are up
    before = cluster_pids(cluster)
    executions = [run(poisoned) for _ in range(3)]
    others = [run(other) for _ in range(5)]
    for execution in executions:
        wait_terminal(execution)
        assert execution.status == "failed"
        assert execution.error.startswith("engine error: OverflowError")
    assert [wait_terminal(e).status for e in others] == ["completed"] * 5
    assert first.status == "completed"
    assert cluster_pids(cluster) == before  # no worker died or was replaced


def test_an_action_raising_systemexit_or_memoryerror_fails_its_step_only(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    cluster = engine(workers=1)
    raising = apply(
        "name: raising\ninputs:\n  exception: {type: string}\nsteps:\n"
        "  - name: only\n    action: test/raise\n"
        "    params: {exception: '{{ inputs.exception }}'}\n"
        "    retry: {max_attempts: 3, backoff: fixed}\n"
    )
    other = other_team_workflow()
    wait_terminal(run(other))
    before = cluster_pids(cluster)
    for exception in ("SystemExit", "MemoryError", "RecursionError"):
        execution = run(raising, exception=exception)
        neighbour = run(other)
        wait_terminal(execution)
        step = StepExecution.objects.get(execution=execution)
        assert (execution.status, step.status) == ("failed", "failed")
        assert step.error == f"{exception}: raised by test/raise"
        assert wait_terminal(neighbour).status == "completed"
    assert cluster_pids(cluster) == before


def test_an_execution_whose_workers_die_twice_is_quarantined(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    doomed = run(
        apply(
            "name: doomed\nsteps:\n  - name: only\n    action: test/sleep\n"
            "    params: {seconds: 60}\n    retry: {max_attempts: 5, backoff: fixed}\n"
        )
    )
    other = other_team_workflow()
    for attempt in (1, 2):
        step = wait_for(
            lambda a=attempt: StepExecution.objects.filter(
                execution=doomed, status="running", attempt=a
            ).first()
        )
        os.kill(int(step.lease_owner.split(":")[1]), signal.SIGKILL)  # type: ignore[union-attr]
        assert wait_terminal(run(other)).status == "completed"
    wait_terminal(doomed)
    step = StepExecution.objects.get(execution=doomed)
    assert (doomed.status, step.status, step.attempt) == ("failed", "failed", 2)
    assert step.error.startswith("quarantined: 2 workers died running it")
    assert Execution.objects.get(id=doomed.id).lost_leases == 2
