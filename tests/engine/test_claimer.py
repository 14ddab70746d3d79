"""The claimer role (engine/claimer.py) in a real `mantle serve --workers-only`: one step worker
at a time holds it (its flock on the serve's file, as the kernel lists it in /proc/locks, the
others waiting behind it); a killed holder's role passes at once, and work goes on while a
holder is stopped (the others' backstop claims)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from executions.models import StepExecution
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.processes import Cluster
from workflows.models import WorkflowDefinition

SLEEP = "name: nap\nsteps:\n  - name: only\n    action: test/sleep\n    params: {seconds: 1}\n"


def step_workers(cluster: Cluster) -> dict[int, str]:
    """{pid: its --claimer-lock file} of the cluster's step-worker processes."""
    workers = {}
    for proc in Path("/proc").iterdir():
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (proc / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError, IndexError):
            continue
        if parent == cluster.process.pid and "mantle_worker" in argv:
            workers[int(proc.name)] = argv[argv.index("--claimer-lock") + 1]
    return workers


def role(cluster: Cluster) -> tuple[set[int], set[int]]:
    """(the pids holding the claimer role, the pids waiting for it), from /proc/locks."""
    workers = step_workers(cluster)
    inodes = {os.stat(path).st_ino for path in workers.values()}
    assert len(inodes) <= 1, "the workers of one serve share one lock file"
    holding: set[int] = set()
    waiting: set[int] = set()
    for line in Path("/proc/locks").read_text().splitlines():
        # "1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF", "1: -> FLOCK …" waits
        fields = line.split()[1:]
        blocked = fields[0] == "->"
        kind, _, _, pid, device = fields[blocked : blocked + 5]
        if kind == "FLOCK" and int(device.rsplit(":", 1)[1]) in inodes:
            (waiting if blocked else holding).add(int(pid))
    return holding & workers.keys(), waiting & workers.keys()


def running_on(workflow: WorkflowDefinition) -> int:
    """Run the workflow; the pid of the worker its step runs on."""
    execution = run(workflow)
    step = wait_for(
        lambda: StepExecution.objects.filter(execution=execution, status="running").first()
    )
    assert isinstance(step, StepExecution)
    assert wait_terminal(execution).status == "completed"
    return int(step.lease_owner.split(":")[1])


def claimer_of(cluster: Cluster, waiters: int) -> int:
    """The pid of the worker holding the role, once `waiters` others wait for it."""
    holding, _ = wait_for(lambda: (r := role(cluster))[0] and len(r[1]) == waiters and r)
    assert len(holding) == 1
    return holding.pop()


def test_one_worker_claims_and_a_killed_claimer_hands_the_role_on(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    cluster = engine(workers=3)
    workflow = apply(SLEEP)
    claimer = claimer_of(cluster, waiters=2)
    # The others claim too, once a second (the backstop): one of them may win a claim now and
    # then, not most of them.
    ran_on = [running_on(workflow) for _ in range(5)]
    assert ran_on.count(claimer) >= 4, (claimer, ran_on)

    os.kill(claimer, signal.SIGKILL)
    successor = wait_for(lambda: role(cluster)[0] - {claimer})
    assert successor and successor <= step_workers(cluster).keys()
    assert running_on(workflow) in step_workers(cluster)


def test_work_goes_on_while_the_claimer_is_stopped(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    cluster = engine(workers=2)
    workflow = apply(SLEEP)
    claimer = claimer_of(cluster, waiters=1)
    os.kill(claimer, signal.SIGSTOP)
    try:
        assert running_on(workflow) != claimer  # a backstop claim of the other worker
        assert role(cluster)[0] == {claimer}
    finally:
        os.kill(claimer, signal.SIGCONT)
