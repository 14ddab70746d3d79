"""Processes that die or stop at the worst moment, against a real worker cluster (`engine`
fixture: lease 2 s, reaper every 0.5 s, backup poller every 1 s)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from executions.models import SLOT_HOLDING, Execution, Status, StepExecution, StepStatus
from teams.models import Team
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.engine.test_recovery import NAP
from tests.processes import ENGINE, ROOT, Cluster, database_url
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

POLL_INTERVAL = ENGINE["queue_poll_interval"]


def holders(workflow: WorkflowDefinition) -> int:
    return Execution.objects.filter(workflow=workflow, status__in=SLOT_HOLDING).count()


def finish_and_die_before_promotion(execution: Execution) -> None:
    """Finish the execution in a child process that is SIGKILLed after its commit and before
    its on-commit promotion."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.die_after_commit", str(execution.id)],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "mantle_site.settings",
        },
        stdout=subprocess.PIPE,
    )
    try:
        ready, _, _ = select.select([child.stdout], [], [], 30)
        assert ready and child.stdout.readline() == b"committed\n", "the child did not commit"
    finally:
        child.kill()
        child.wait(timeout=10)
        child.stdout.close()


def test_the_poller_promotes_within_one_interval_after_the_finisher_is_killed_before_promotion(
    engine: Callable[..., object], team: Team
) -> None:
    engine()
    workflow = workflow_apply(team=team, content=NAP).workflow
    finished, waiting = run(workflow, seconds=30), run(workflow, seconds=0)
    assert waiting.status == Status.QUEUED
    wait_for(lambda: StepExecution.objects.filter(execution=finished, status="running").exists())

    finish_and_die_before_promotion(finished)

    finished.refresh_from_db()
    assert finished.status == Status.COMPLETED
    wait_for(lambda: Execution.objects.get(id=waiting.id).promoted_at, timeout=10)
    waiting.refresh_from_db()
    recovery = (waiting.promoted_at - finished.completed_at).total_seconds()
    print(f"\n[faults] kill -9 before promotion: the poller promoted {recovery:.2f}s after commit")
    # One poller interval, plus the clock's resolution (0.25 s) and its hand-over between links.
    assert recovery <= POLL_INTERVAL + 0.75
    # No slot leaked: the queue drains, and afterwards the workflow's one slot is free.
    assert wait_terminal(waiting).status == Status.COMPLETED
    assert holders(workflow) == 0
    assert run(workflow, seconds=0).status == Status.PENDING


STUBBORN = """
name: stubborn
steps:
  - name: nap
    action: test/sleep
    params: {seconds: 3}
    retry: {max_attempts: 2}
"""


def stopped_attempt_done(cluster: Cluster, step_id: int) -> bool:
    """Whether the stopped worker has let go of attempt 1 (it logs giving it up, or dropping its
    result, at WARNING)."""
    return f"step {step_id} attempt 1: " in cluster.log.read_text()


def test_a_worker_stopped_past_its_lease_loses_the_step_and_cannot_write_over_the_new_attempt(
    engine: Callable[..., Cluster], team: Team
) -> None:
    """Catches writes of an attempt not fenced by its lease owner (runner.py: the heartbeat's
    and settle's conditions): the stopped worker resumes with its sleep already over, and
    unfenced it renews the lease of the new attempt and settles the step `completed` while the
    attempt the reaper handed to another worker is still running (checked by removing the owner
    from both conditions in a copy). Unfencing settle alone is caught only when the resumed
    worker settles before it heartbeats, which is a race; usually the fenced heartbeat makes it
    drop the attempt first."""
    cluster = engine()
    execution = run(workflow_apply(team=team, content=STUBBORN).workflow)
    step = wait_for(
        lambda: StepExecution.objects.filter(execution=execution, status="running").first()
    )
    old_owner = step.lease_owner
    pid = int(old_owner.split(":")[1])
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        wait_for(
            lambda: StepExecution.objects.filter(
                id=step.id, attempt=2, status=StepStatus.RUNNING
            ).exists(),
            timeout=15,
        )
        takeover = time.monotonic() - stopped
    finally:
        os.kill(pid, signal.SIGCONT)
    step.refresh_from_db()
    new_owner = step.lease_owner
    assert new_owner not in ("", old_owner)
    assert step.error.startswith("lease expired")
    # The resumed worker lets go of attempt 1 (its heartbeat finds the lease gone, or its sleep
    # is long over and it tries to settle `completed`) while the new attempt still sleeps.
    wait_for(lambda: stopped_attempt_done(cluster, step.id), timeout=10)
    step.refresh_from_db()
    assert (step.status, step.attempt, step.lease_owner) == (StepStatus.RUNNING, 2, new_owner)

    assert wait_terminal(execution).status == Status.COMPLETED
    step.refresh_from_db()
    assert (step.status, step.attempt) == (StepStatus.COMPLETED, 2)
    print(
        f"\n[faults] SIGSTOP past the lease: attempt 2 running on another worker {takeover:.2f}s "
        "after the stop; the resumed worker wrote nothing"
    )
    # The lease, a reaper pass, the 1 s retry backoff, a pick-up; slack for a loaded machine.
    assert takeover < ENGINE["step_lease"] + 4
