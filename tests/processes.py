"""Real processes for the tests that need them: the workers (`mantle serve --workers-only`: step
workers and the django-q2 cluster) and `mantle serve`, each against a database given as a URL,
with short leases and intervals from MANTLE_ENGINE_* variables. The fixtures that start them
(`engine`, `serve`) are in conftest.py. And what the tests of the embedded PostgreSQL use: a fresh
MANTLE_HOME, the environment of a command run on it, the processes left behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx
import psycopg
import pytest
from django.conf import settings

from mantle_site import embedded_db

ROOT = Path(__file__).resolve().parents[1]
ENGINE = {"step_lease": 2.0, "reaper_interval": 0.5, "queue_poll_interval": 1.0}
# The suite's own configuration, whatever ./mantle.yaml or the caller's environment says.
CONFIG = {"MANTLE_CONFIG": str(ROOT / "tests" / "mantle.yaml")}
SETTINGS = "mantle_site.settings"


def database_url() -> str:
    """The test database as a URL (the host may be a socket directory: embedded PostgreSQL)."""
    db = settings.DATABASES["default"]
    libpq = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
    options = {key: value for key, value in db["OPTIONS"].items() if key in libpq}
    query = {"host": db["HOST"] or "127.0.0.1", "port": db["PORT"] or "5432", **options}
    password = f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else ""
    return f"postgresql://{quote(db['USER'])}{password}@/{db['NAME']}?{urlencode(query)}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    """`mantle serve --workers-only` with `workers` step-worker processes of `slots` slots."""

    def __init__(
        self, *, workers: int, slots: int, broker: str, log: Path, env: dict[str, str] | None
    ) -> None:
        self.log = log
        env = {
            **os.environ,
            **CONFIG,
            "DATABASE_URL": database_url(),
            "MANTLE_ENGINE_WORKERS": str(workers),
            "MANTLE_ENGINE_SLOTS_PER_WORKER": str(slots),
            "MANTLE_ENGINE_BROKER": broker,
            **{f"MANTLE_ENGINE_{key.upper()}": str(value) for key, value in ENGINE.items()},
            **(env or {}),
        }
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "mantle_serve", "--workers-only"],
                env=env,
                cwd=ROOT,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)  # serve and its children
                self.process.wait(timeout=5)


class Server:
    """`mantle serve` in a process group of its own, logging to a file."""

    def __init__(
        self,
        tmp: Path,
        *,
        database_url: str,
        web_only: bool,
        workers: int,
        env: dict[str, str] | None = None,
    ) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = tmp / "serve.log"
        env = {
            **os.environ,
            **CONFIG,
            "DATABASE_URL": database_url,
            "PROMETHEUS_MULTIPROC_DIR": str(tmp / "metrics"),
            "MANTLE_SERVER_WORKERS": str(workers),
            "MANTLE_ENGINE_WORKERS": "2",
            "MANTLE_HOME": str(tmp / "home"),
            **(env or {}),
        }
        role = ["--web-only"] if web_only else []
        command = [sys.executable, "manage.py", "mantle_serve", *role, "--bind", self.url[7:]]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"mantle serve not ready:\n{self.log.read_text()}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def metric(self, name: str, **labels: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        return scrape(text, name, **labels)


def scrape(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 when none)."""
    total = 0.0
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        if not match or match[1] != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match[2] or ""))
        if all(found.get(key) == value for key, value in labels.items()):
            total += float(match[3])
    return total


# The embedded server's own tests ignore DATABASE_URL: CI's pass on the machine's PostgreSQL
# (DATABASE_URL set) would only run them again.
EMBEDDED_ONLY = pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL")), reason="run by the pass on the embedded PostgreSQL"
)


def embedded_env(home: Path) -> dict[str, str]:
    """The environment of a `mantle` command on the embedded PostgreSQL under `home`, as on a
    fresh clone: none of this session's database or metrics settings."""
    hidden = {
        "DATABASE_URL",
        "MANTLE_DATABASE_URL",
        "MANTLE_DATABASE_DIRECT_URL",
        embedded_db.URL_ENV,
        "PROMETHEUS_MULTIPROC_DIR",
    }
    env = {key: value for key, value in os.environ.items() if key not in hidden}
    return {**env, **CONFIG, "MANTLE_HOME": str(home), "DJANGO_SETTINGS_MODULE": SETTINGS}


def postgres_pids(pgdata: Path) -> list[int]:
    """The PostgreSQL processes running on `pgdata` (a server works in its data directory)."""
    pids = []
    for process in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(process / "exe")).name == "postgres" and os.readlink(
                process / "cwd"
            ) == str(pgdata.resolve()):
                pids.append(int(process.name))
        except OSError:
            continue
    return pids


@contextlib.contextmanager
def fresh_home() -> Iterator[Path]:
    """A MANTLE_HOME of its own, as on a fresh clone; no PostgreSQL may be left running on it.
    Not under tmp_path: run as root, the server's own user must traverse the home's parents,
    and another pytest session of root resets /tmp/pytest-of-root to 0700."""
    with tempfile.TemporaryDirectory(prefix="mantle-home-") as directory:
        home = Path(directory)
        yield home
        assert postgres_pids(home / "pgdata") == [], "a server outlived its last user"


def descendants(pid: int) -> set[int]:
    """The processes descended from `pid`, now."""
    found: set[int] = set()
    stack = [pid]
    while stack:
        for task in Path(f"/proc/{stack.pop()}/task").glob("*"):
            try:
                children = {int(child) for child in (task / "children").read_text().split()}
            except OSError:
                continue
            stack.extend(children - found)
            found |= children
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
