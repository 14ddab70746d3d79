"""`mantle serve`: the web app (gunicorn) and the worker cluster (django-q2) in the foreground.

Ctrl-C or SIGTERM stops both (and the embedded PostgreSQL when this process started it). With
--web-only / --workers-only, machines sharing one PostgreSQL split the roles.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from engine import schedules
from executions import metrics
from mantle_site import embedded_db

# How long the web app and the cluster get to stop on Ctrl-C / SIGTERM before they are killed.
STOP_GRACE = 30.0


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
        # The embedded PostgreSQL (if used) is up before the children connect to it at once.
        connection.ensure_connection()
        commands = []
        if not workers_only:
            commands.append(self.web_command(bind or settings.MANTLE.server.bind))
        if not web_only:
            schedules.start_engine()
            commands.append([sys.executable, "-m", "django", "qcluster"])
        env = self.child_env()
        # Each child leads a process group of its own, so stopping it reaches its workers too.
        children = [
            subprocess.Popen(command, env=env, start_new_session=True) for command in commands
        ]
        stopping = False

        def stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        while not stopping and all(child.poll() is None for child in children):
            time.sleep(0.2)
        for child in children:
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for child in children:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # A worker still busy (a step that does not stop) would outlive `mantle serve`.
                child.kill()
                child.wait()
            _signal_group(child, signal.SIGKILL)  # whatever of its group is left
        if settings.USES_EMBEDDED_DB:
            embedded_db.stop()
        failed = [child.returncode for child in children if child.returncode not in (0, -15)]
        if failed and not stopping:
            raise SystemExit(1)

    def child_env(self) -> dict[str, str]:
        """Every child counts its metrics in one shared directory (prometheus_client's
        multiprocess mode), so one scrape of any web worker sees them all."""
        directory = os.environ.get(metrics.MULTIPROC_ENV) or str(embedded_db.home() / "metrics")
        metrics.prepare_multiprocess_dir(Path(directory))
        return {**os.environ, metrics.MULTIPROC_ENV: directory}

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
        ]
