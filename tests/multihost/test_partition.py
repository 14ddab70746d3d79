"""Partition: an app host (web and workers) loses its link to the database host for 5 s in the
middle of a webhook flood, then gets it back. Its clients get 503 `database_unavailable` (no
500, no request hanging past the client timeouts); its steps in flight run again once their
leases expire (on the other host, or on it once it is back); its late writes change nothing."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import httpx
import pytest

from tests.api.conftest import hook_yaml
from tests.factories import workflow_yaml
from tests.faults.flood import Flood, Result, post
from tests.multihost.conftest import Hosts
from tests.multihost.hosts import AppHost

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

PARTITION = 5.0
LEASE = 4.0
IN_FLIGHT = 10
HOLD = 4  # seconds each in-flight step sleeps
HOLD_STEP = (
    f"  - name: hold\n    action: test/sleep\n    params: {{seconds: {HOLD}}}\n"
    "    retry: {max_attempts: 3}\n"
)
STEPS_SQL = """
SELECT s.id, s.status, s.attempt, s.lease_owner, extract(epoch FROM s.started_at),
       extract(epoch FROM s.completed_at), s.error
  FROM executions_stepexecution s
  JOIN executions_execution e ON e.id = s.execution_id
  JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
 WHERE w.name = 'in-flight'
"""
EXECUTIONS_SQL = """
SELECT e.status, count(*) FROM executions_execution e
  JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
 WHERE w.name = 'in-flight' GROUP BY 1
"""


def count(flood: Flood) -> dict[int, int]:
    return dict(Counter(r.status for r in flood.results))


def owner_pid(owner: str) -> int:
    return int(owner.split(":")[-2])


def test_a_partitioned_host_answers_503_and_its_late_writes_change_nothing(
    hosts: Hosts, start_apps
) -> None:
    database = hosts.database
    token = database.team(
        "cut",
        limit=None,
        workflows=[
            workflow_yaml("in-flight", steps=HOLD_STEP),
            hook_yaml("hook", "/hooks/cut"),
        ],
    )
    # Half the steps a host: a step worker with free slots claims every ready step at once.
    cut, other = start_apps(
        [None, None], engine={"step_lease": LEASE, "slots_per_worker": IN_FLIGHT // 2}
    )
    with httpx.Client(timeout=10, headers={"Authorization": f"Bearer {token}"}) as client:
        for n in range(IN_FLIGHT):
            answer = client.post(f"{(cut, other)[n % 2].url}/api/v1/run/in-flight", json={})
            assert answer.status_code == 202, answer.text
    deadline = time.monotonic() + 30
    while len(running := [s for s in database.query(STEPS_SQL) if s[1] == "running"]) < IN_FLIGHT:
        assert time.monotonic() < deadline, running
        time.sleep(0.1)
    cut_pids = set(cut.host.pids())
    stranded = {step[0] for step in running if owner_pid(step[3]) in cut_pids}
    assert stranded, "the partitioned host runs none of the steps"

    def to(app: AppHost) -> Callable[[httpx.Client, int], Result]:
        return lambda client, n: post(client, f"{app.url}/hooks/cut")

    with Flood(4, to(cut), timeout=10) as on_cut, Flood(4, to(other), timeout=10) as on_other:
        time.sleep(1)
        cut_at, cut_clock = time.time(), time.monotonic()
        cut.host.cut_back_link(hosts.network.bridges[0])
        taken_over: dict[int, tuple[float, float]] = {}  # step: (seen at, attempt started)
        restored_clock = 0.0
        while len(taken_over) < len(stranded):
            if not restored_clock and time.time() >= cut_at + PARTITION:
                cut.host.restore_back_link(hosts.network.bridges[0])
                restored_clock = time.monotonic()
            assert time.time() < cut_at + 30, f"taken over: {taken_over} of {stranded}"
            for step_id, status, attempt, _, started, *_ in database.query(STEPS_SQL):
                # Started again: attempt 2, or a later one when attempt 2 was itself cut short
                # between two of these reads (both count: see the final checks).
                if step_id in stranded and attempt >= 2 and status in ("running", "completed"):
                    taken_over.setdefault(step_id, (time.time(), float(started)))
            time.sleep(0.05)
        if not restored_clock:
            time.sleep(cut_at + PARTITION - time.time())
            cut.host.restore_back_link(hosts.network.bridges[0])
            restored_clock = time.monotonic()
        time.sleep(3)
    deadline = time.monotonic() + 60
    while unfinished := [s for s in database.query(STEPS_SQL) if s[1] in ("pending", "running")]:
        assert time.monotonic() < deadline, unfinished
        time.sleep(0.2)

    answers = on_cut.results + on_other.results
    statuses = Counter(r.status for r in answers)
    unavailable = [r for r in on_cut.results if r.status == 503]
    after = [r for r in on_cut.results if r.started > restored_clock]
    first_after = min((r.started + r.seconds for r in after if r.status == 202), default=-1.0)
    after_cut = sorted(seen - cut_at for seen, _ in taken_over.values())
    print(
        f"\n[hosts] partition {PARTITION:g}s: partitioned host {count(on_cut)}, "
        f"other host {count(on_other)}; 503s sent "
        f"{min(r.started for r in unavailable) - cut_clock:.2f}-"
        f"{max(r.started for r in unavailable) - cut_clock:.2f}s after the cut, slowest answer "
        f"{max(r.seconds for r in answers):.2f}s, first 202 {first_after - restored_clock:.2f}s "
        f"after the restore; {len(stranded)} stranded steps running again (attempt 2 or later) "
        f"{after_cut[0]:.2f}-{after_cut[-1]:.2f}s after the cut (lease {LEASE:g}s); "
        f"{sum(1 for s in database.query(STEPS_SQL) if s[0] in stranded and s[2] > 2)} "
        "needed a third attempt"
    )
    assert set(statuses) <= {202, 503}, [r for r in answers if r.status not in (202, 503)]
    assert unavailable and all(r.body.get("error") == "database_unavailable" for r in unavailable)
    # The other host carries on; only while a transaction cut off mid-way still holds the team's
    # lock (until PgBouncer drops its client) may an admission there give up on it: 503 busy.
    assert all(r.status == 202 or r.body["error"] == "busy" for r in on_other.results)
    assert first_after > 0, "the partitioned host never admitted again"
    # The late writes of the stale owner changed nothing: every stranded step ended with a later
    # attempt, completed a full HOLD after that attempt started.
    final = {s[0]: s for s in database.query(STEPS_SQL)}
    for step_id in stranded:
        _, status, attempt, _, started, completed, error = final[step_id]
        assert (status, error) == ("completed", "")
        assert attempt >= 2 and float(completed) >= float(started) + HOLD
    assert set(dict(database.query(EXECUTIONS_SQL))) == {"completed"}
