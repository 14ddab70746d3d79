"""Figure 10's peer, run: a fresh `prefect server start` (its defaults, analytics off: this
machine has no way out) on its own database of the same PostgreSQL, a global concurrency limit
created with `prefect gcl create`, then bench.prefect_peer in a process of its own, whose
output is checked before it is believed (`parse`). Free of Django and of Prefect: the process
of `python -m bench` only starts Prefect's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from psycopg.conninfo import conninfo_to_dict

from bench import database, servers
from bench.measure import Measure, handoffs_ms, max_overlap

PREFECT_DATABASE = f"{database.NAME}_prefect"  # one per bench database: benches share a server
PREFECT = str(Path(sys.executable).with_name("prefect"))
START_TIMEOUT = 240.0  # seconds: its first start runs its migrations, slow on a loaded machine


class PeerOutputError(RuntimeError):
    """The peer's process said something the figure cannot stand on."""


@dataclass(frozen=True)
class PeerResult:
    measure: Measure
    handoffs_ms: list[float]
    errors: list[str]  # a few of the failed tasks' errors


def parse(stdout: str, returncode: int, *, executions: int, limit: int) -> PeerResult:
    """The peer's `RESULT` line, refused unless the process exited 0 with exactly one, it
    answers for the executions asked for, and its limited tasks never overlapped beyond the
    limit (else Prefect's limit was not what was measured)."""
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if returncode != 0 or len(lines) != 1:
        raise PeerOutputError(f"exit {returncode}, {len(lines)} RESULT lines: {stdout[-2000:]}")
    found = json.loads(lines[0].removeprefix("RESULT "))
    intervals = [(float(start), float(end)) for start, end in found["intervals"]]
    count, done, failed = int(found["count"]), int(found["done"]), int(found["failed"])
    seconds = float(found["seconds"])
    if count != executions or not 0 <= failed <= done <= count or seconds <= 0:
        raise PeerOutputError(f"count {count} of {executions}, done {done}, failed {failed}")
    if len(intervals) < done - failed or any(end < start for start, end in intervals):
        raise PeerOutputError(f"{len(intervals)} limited intervals for {done - failed} done")
    at_once = max_overlap(intervals)
    if at_once > limit:
        raise PeerOutputError(f"{at_once} limited tasks at once under a limit of {limit}")
    measure = Measure(count=count, seconds=seconds, done=done, failed=failed, max_running=at_once)
    errors = [str(error) for error in found.get("errors", [])]
    return PeerResult(measure, handoffs_ms(intervals, limit), errors)


def _asyncpg_url(url: str) -> str:
    """Prefect's database as a URL SQLAlchemy's asyncpg dialect reads."""
    params = conninfo_to_dict(url)
    user = params.get("user", "postgres")
    host = str(params.get("host", "127.0.0.1"))
    if host.startswith("/"):
        return f"postgresql+asyncpg://{user}@/{PREFECT_DATABASE}?host={host}"
    port = params.get("port", 5432)
    return f"postgresql+asyncpg://{user}@{host}:{port}/{PREFECT_DATABASE}"


def _recreate(*, drop_only: bool = False) -> None:
    with psycopg.connect(
        database.with_database(os.environ["DATABASE_URL"], "postgres"), autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{PREFECT_DATABASE}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{PREFECT_DATABASE}"')


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: uvicorn and its services
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def server() -> Iterator[dict[str, str]]:
    """The environment of a Prefect client of a fresh server, once /api/health answers."""
    _recreate()
    port = servers.free_port()
    with tempfile.TemporaryDirectory(prefix="prefect-home-") as home:
        environment = {
            **os.environ,
            "PREFECT_HOME": home,
            "PREFECT_API_DATABASE_CONNECTION_URL": _asyncpg_url(os.environ["DATABASE_URL"]),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
            "PREFECT_LOGGING_LEVEL": "WARNING",
        }
        log = Path(home, "server.log")
        with log.open("wb") as output:
            process = subprocess.Popen(
                [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=environment,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            _wait_healthy(process, port, log)
            yield environment
        finally:
            _stop(process)
            _recreate(drop_only=True)


def _wait_healthy(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"prefect server start did not answer:\n{log.read_text()[-2000:]}")


def run(*, executions: int, limit: int, seconds: float, deadline: float) -> PeerResult:
    """`executions` chains on a fresh Prefect server, whose limit `bench-step` holds `limit`."""
    with server() as environment:
        subprocess.run(
            [PREFECT, "gcl", "create", "bench-step", "--limit", str(limit)],
            env=environment,
            check=True,
            capture_output=True,
        )
        arguments = [str(executions), "bench-step", str(seconds), str(deadline)]
        peer = subprocess.run(
            [sys.executable, "-m", "bench.prefect_peer", *arguments],
            cwd=servers.ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=deadline + 120,
        )
    try:
        return parse(peer.stdout, peer.returncode, executions=executions, limit=limit)
    except PeerOutputError as error:
        raise PeerOutputError(f"the Prefect peer: {error}\n{peer.stderr[-2000:]}") from error
