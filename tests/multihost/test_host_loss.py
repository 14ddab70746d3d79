"""Host loss: every process of a worker host SIGKILLed while it runs 20 steps. Another worker
host (frozen with SIGSTOP until then, so the lost host holds all 20) retries each one after its
lease expires; the slots are freed and the queue behind them promoted."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.factories import workflow_yaml
from tests.multihost.conftest import Hosts
from tests.processes import ENGINE

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

RUNNING, QUEUED = 20, 5
STEP = (
    "  - name: hold\n    action: test/sleep\n    params: {seconds: 4}\n"
    "    retry: {max_attempts: 2}\n"
)
STEPS_SQL = """
SELECT s.id, s.status, s.attempt, s.lease_owner, extract(epoch FROM s.lease_expires_at)
  FROM executions_stepexecution s
  JOIN executions_execution e ON e.id = s.execution_id
  JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = %s
"""
EXECUTIONS_SQL = """
SELECT e.status, count(*) FROM executions_execution e JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = %s GROUP BY 1
"""


def owner_pid(owner: str) -> int:
    return int(owner.split(":")[-2])


def signal_host(pids: list[int], signum: int) -> None:
    for pid in pids:
        os.kill(pid, signum)


def test_a_lost_worker_host_has_its_steps_taken_over_within_a_lease(hosts: Hosts, start_apps):
    database = hosts.database
    database.team("loss", limit=None, workflows=[workflow_yaml("held", limit=RUNNING, steps=STEP)])
    lost, survivor = start_apps(["workers-only", "workers-only"])
    frozen = survivor.host.pids()
    signal_host(frozen, signal.SIGSTOP)
    try:
        database.admit("loss", "held", RUNNING + QUEUED)
        deadline = time.monotonic() + 30
        while True:
            steps = database.query(STEPS_SQL, ["loss"])
            running = [s for s in steps if s[1] == "running"]
            if len(running) == RUNNING:
                break
            assert time.monotonic() < deadline, f"{len(running)} running"
            time.sleep(0.1)
        lost_pids = set(lost.host.pids())
        assert {owner_pid(step[3]) for step in running} <= lost_pids
    finally:
        signal_host(frozen, signal.SIGCONT)
    killed_at = time.time()
    assert lost.host.kill_all() > 0
    # The leases as the lost host last renewed them (same machine: one clock for both sides).
    expiry = {step_id: float(at) for step_id, *_, at in database.query(STEPS_SQL, ["loss"])}

    # Each of the 20 steps is seen running again (attempt 2) on the surviving host.
    taken_over: dict[int, float] = {}
    survivor_pids = set(survivor.host.pids())
    deadline = time.monotonic() + 30  # taken over at all
    while len(taken_over) < RUNNING:
        assert time.monotonic() < deadline, f"taken over: {len(taken_over)} of {RUNNING}"
        for step_id, status, attempt, owner, _ in database.query(STEPS_SQL, ["loss"]):
            if step_id in taken_over or attempt < 2 or status == "pending":
                continue
            if status == "running":
                assert owner_pid(owner) in survivor_pids
            taken_over[step_id] = time.time()
        time.sleep(0.05)
    deadline = time.monotonic() + 60
    while (outcome := dict(database.query(EXECUTIONS_SQL, ["loss"]))) != {
        "completed": RUNNING + QUEUED
    }:
        assert time.monotonic() < deadline, outcome
        time.sleep(0.2)
    after_kill = sorted(at - killed_at for at in taken_over.values())
    after_expiry = sorted(at - expiry[step_id] for step_id, at in taken_over.items())
    print(
        f"\n[hosts] host loss: {RUNNING} steps running again on the other host "
        f"{after_kill[0]:.2f}-{after_kill[-1]:.2f}s after the SIGKILL, "
        f"{after_expiry[0]:.2f}-{after_expiry[-1]:.2f}s after their leases expired "
        f"(step_lease {ENGINE['step_lease']}s, reaper every {ENGINE['reaper_interval']}s, "
        f"retry backoff 1s); all {RUNNING + QUEUED} completed"
    )
    # Never taken over while the lease could still be renewed (nothing twice at once).
    assert after_expiry[0] > 0
