"""`mantle serve`: the web app (gunicorn), the django-q2 cluster (schedules), the engine clock
and `engine.workers` step-worker processes, in the foreground.

Ctrl-C or SIGTERM stops them all, and the embedded PostgreSQL unless another `mantle` process
still uses it (mantle_site.embedded_db); the children get SIGTERM if this process is killed, so
none is left behind. A step worker or the
clock that dies is started again (the reaper recovers what a worker held). With --web-only /
--workers-only, machines sharing one PostgreSQL split the roles.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from engine import schedules
from executions import metrics
from mantle_site import embedded_db

# How long the children get to stop on Ctrl-C / SIGTERM before they are killed.
STOP_GRACE = 30.0
STEP_WORKER = [sys.executable, "-m", "django", "mantle_worker"]
CLOCK = [sys.executable, "-m", "django", "mantle_clock"]
WEB_WORKER = "mantle_site.web_worker.ReadingSyncWorker"
RESTART_DELAY = 1.0  # seconds a restarted process runs before it may be started again
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In a child before exec: SIGTERM when `mantle serve` dies, even by kill -9 (Linux)."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signum)


class Command(BaseCommand):
    help = "Run the web app and the worker cluster until Ctrl-C / SIGTERM."

    def add_arguments(self, parser: CommandParser) -> None:
        roles = parser.add_mutually_exclusive_group()
        roles.add_argument("--web-only", action="store_true", help="only the web app and API")
        roles.add_argument("--workers-only", action="store_true", help="only the worker cluster")
        parser.add_argument("--bind", help="host:port (default: server.bind of mantle.yaml)")

    def handle(
        self, *args: Any, web_only: bool, workers_only: bool, bind: str | None, **opts: Any
    ) -> None:
        # The embedded PostgreSQL (if used) is started or adopted here, once, before any child
        # starts: the children get its URL (child_env) and never start it themselves.
        connection.ensure_connection()
        # The step workers' claimer role (engine/claimer.py): a lock on this file, theirs alone.
        with tempfile.NamedTemporaryFile(prefix="mantle-claimer-") as claimer_lock:
            self.supervise(
                web_only=web_only,
                workers_only=workers_only,
                bind=bind,
                claimer_lock=claimer_lock.name,
            )

    def supervise(
        self, *, web_only: bool, workers_only: bool, bind: str | None, claimer_lock: str
    ) -> None:
        """Start the children, start again a clock or step worker that dies, stop them all on
        Ctrl-C / SIGTERM (or when the web app or the cluster fails)."""
        commands = []
        restarted: list[bool] = []  # the clock and the step workers: started again if they die
        if not workers_only:
            commands.append(self.web_command(bind or settings.MANTLE.server.bind))
            restarted.append(False)
        if not web_only:
            schedules.upsert_schedules()
            step_worker = [*STEP_WORKER, "--claimer-lock", claimer_lock]
            commands.extend([[sys.executable, "-m", "django", "qcluster"], CLOCK])
            commands.extend([step_worker] * settings.MANTLE.engine.workers)
            restarted.extend([False, True, *[True] * settings.MANTLE.engine.workers])
        env = self.child_env()
        children = [self.start(command, env) for command in commands]
        started = [time.monotonic()] * len(children)
        stopping = broken = False

        def stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        while not stopping:
            for index, child in enumerate(children):
                if child.poll() is None:
                    continue
                if not restarted[index]:
                    broken = True  # the web app or the cluster failed: stop everything
                elif time.monotonic() - started[index] >= RESTART_DELAY:
                    children[index] = self.start(commands[index], env)
                    started[index] = time.monotonic()
            if broken:
                break
            time.sleep(0.2)
        # SIGTERM to each child itself: gunicorn's master and django-q2's cluster stop their own
        # processes in order (a cluster whose processes all get SIGTERM at once never exits).
        # What is left of a group after the grace period is killed below.
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for child in children:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # A worker still busy (a step that does not stop) would outlive `mantle serve`.
                child.kill()
                child.wait()
            _signal_group(child, signal.SIGKILL)  # whatever of its group is left
        failed = [child.returncode for child in children if child.returncode not in (0, -15)]
        if broken or (failed and not stopping):
            raise SystemExit(1)

    def start(self, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        # Each child leads a process group of its own, so stopping it reaches its workers too.
        return subprocess.Popen(
            command, env=env, start_new_session=True, preexec_fn=_die_with_parent
        )

    def child_env(self) -> dict[str, str]:
        """Every child counts its metrics in one shared directory (prometheus_client's
        multiprocess mode), so one scrape of any web worker sees them all; on the embedded
        PostgreSQL, every child connects to the server this process started or adopted."""
        directory = os.environ.get(metrics.MULTIPROC_ENV) or str(embedded_db.home() / "metrics")
        metrics.prepare_multiprocess_dir(Path(directory))
        env = {**os.environ, metrics.MULTIPROC_ENV: directory}
        if settings.USES_EMBEDDED_DB:
            env[embedded_db.URL_ENV] = embedded_db.ensure_running()
        return env

    def web_command(self, bind: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "gunicorn",
            "--config",
            "python:mantle_site.gunicorn_conf",
            "--bind",
            bind,
            "--workers",
            str(settings.MANTLE.server.workers),
            "--threads",
            str(settings.MANTLE.server.threads),
            # One thread: the sync worker that reads each request whole before serving it
            # (mantle_site/web_worker.py); more: gunicorn's gthread worker.
            *(["--worker-class", WEB_WORKER] if settings.MANTLE.server.threads == 1 else []),
            *(["--access-logfile", "-"] if settings.MANTLE.server.access_log else []),
        ]
