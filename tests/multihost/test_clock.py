"""Three clusters on three worker hosts: the engine clock (reaper, poller, cron) ticks on exactly
one of them at every observation, moves to another host when its process is killed, a step
whose worker died is retried once, not once per cluster, the poller runs once per interval (not
once per cluster) and each cron tick admits one execution."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import psycopg
import pytest

from core import locks
from tests.factories import workflow_yaml
from tests.multihost.conftest import Hosts
from tests.processes import ENGINE

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

STEP = (
    "  - name: hold\n    action: test/sleep\n    params: {seconds: 3}\n"
    "    retry: {max_attempts: 3}\n"
)
CLOCK_SQL = """
SELECT host(a.client_addr) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = 0 AND l.granted
"""
STEPS_SQL = """
SELECT s.id, s.status, s.attempt, s.lease_owner FROM executions_stepexecution s
  JOIN executions_execution e ON e.id = s.execution_id
  JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = 'clock'
"""
# Cron's resolution is a minute (five fields): the test lasts until one tick has been admitted.
CRON = 'triggers:\n  - type: cron\n    schedule: "* * * * *"\n'
TICKS_SQL = """
SELECT e.trigger->>'scheduled_at', count(*) FROM executions_execution e
  JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = 'clock' AND e.trigger->>'type' = 'cron'
 GROUP BY 1
"""


class ClockWatch(threading.Thread):
    """Which hosts hold the clock's lock, sampled in a loop on the database host."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.samples: list[tuple[float, list[str]]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.halt.is_set():
                rows = conn.execute(CLOCK_SQL, [locks.Namespace.ENGINE_TICKER]).fetchall()
                self.samples.append((time.monotonic(), [address for (address,) in rows]))
                time.sleep(0.01)


def process_of(pids: list[int], command: str) -> int:
    found = [pid for pid in pids if command in _command_line(pid)]
    assert len(found) == 1, found
    return found[0]


def _command_line(pid: int) -> str:
    """The process's command line, "" once it has exited (a short-lived child listed a moment
    before)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except FileNotFoundError:
        return ""


def test_three_clusters_tick_once_and_retry_a_lost_step_once(
    hosts: Hosts, start_apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = hosts.database
    database.team(
        "clock",
        limit=None,
        workflows=[workflow_yaml("reaped", steps=STEP), workflow_yaml("ticking", extra=CRON)],
    )
    monkeypatch.setenv("MANTLE_LOG_LEVEL", "INFO")  # the poller's line a pass
    started = time.monotonic()
    apps = start_apps(["workers-only"] * 3)
    by_address = {app.host.back: app for app in apps}
    watch = ClockWatch(database.direct_url)
    watch.start()
    try:
        database.admit("clock", "reaped", 6)
        deadline = time.monotonic() + 30
        while len(running := [s for s in database.query(STEPS_SQL) if s[1] == "running"]) < 6:
            assert time.monotonic() < deadline, running
            time.sleep(0.1)
        # A step worker dies (its steps are reaped by whichever clock ticks) ...
        victim = int(running[0][3].split(":")[-2])
        lost = {s[0] for s in running if int(s[3].split(":")[-2]) == victim}
        os.kill(victim, signal.SIGKILL)
        # ... and so does the clock process holding the lock.
        holder = by_address[watch.samples[-1][1][0]]
        killed_at = time.monotonic()
        os.kill(process_of(holder.host.pids(), "mantle_clock"), signal.SIGKILL)
        deadline = time.monotonic() + 60
        while unfinished := [s for s in database.query(STEPS_SQL) if s[1] != "completed"]:
            assert time.monotonic() < deadline, unfinished
            time.sleep(0.2)
        deadline = started + 90
        while not database.query(TICKS_SQL):
            assert time.monotonic() < deadline, "no cron tick admitted"
            time.sleep(0.5)
        lasted = time.monotonic() - started
        passes = [app.log.read_text().count("poller pass:") for app in apps]
    finally:
        watch.halt.set()
        watch.join(timeout=10)
    steps = database.query(STEPS_SQL)
    holders = [held for _, held in watch.samples]
    after = [(at, held) for at, held in watch.samples if at > killed_at]
    released = next((at for at, held in after if not held), killed_at)
    taken = next(at for at, held in after if held and at >= released)
    reaped = sum(app.log.read_text().count("reaped step") for app in apps)
    attempts = {s[0]: s[2] for s in steps}
    ticks = database.query(TICKS_SQL)
    interval = ENGINE["queue_poll_interval"]
    print(
        f"\n[hosts] clock: {len(watch.samples)} samples, at most {max(map(len, holders))} holder, "
        f"none in {sum(1 for h in holders if not h)}; held again {taken - killed_at:.2f}s after "
        f"its process was killed; {len(lost)} steps of a killed worker reaped {reaped} times; "
        f"poller passes per host {passes} in {lasted:.1f}s (every {interval}s); cron ticks {ticks}"
    )
    assert max(map(len, holders)) == 1
    assert reaped == len(lost)
    assert {attempts[step] for step in lost} == {2}
    assert all(attempts[step] == 1 for step in attempts if step not in lost)
    # One poller for the three clusters: at most one pass an interval (three clusters each
    # polling would make about three), and it did run.
    assert lasted / interval / 4 <= sum(passes) <= lasted / interval + 1
    assert all(count == 1 for _, count in ticks)
