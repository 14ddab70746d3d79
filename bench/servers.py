"""Start `mantle serve --web-only` and the worker cluster as real processes on `mantle_bench`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environment(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "mantle_site.settings", **extra}


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # Its own session (start_new_session): the whole group, children included.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def web(*, workers: int | None = None) -> Iterator[str]:
    """Base URL of `mantle serve --web-only` (`workers` gunicorn workers, else the default)
    once /healthz answers."""
    environment = {"MANTLE_SERVER_WORKERS": str(workers)} if workers else {}
    with serve("--web-only", environment=environment) as base:
        yield base


@contextmanager
def serve(*options: str, environment: dict[str, str] | None = None) -> Iterator[str]:
    """Base URL of `mantle serve` (by default web and workers, as a user runs it) once /healthz
    answers."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mantle_serve", *options, "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=_environment(environment or {}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"mantle serve exited with {process.returncode}")
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("mantle serve did not answer /healthz within 60 s")
            time.sleep(0.2)
        yield base
    finally:
        _stop(process)


@contextmanager
def cluster(*, workers: int) -> Iterator[None]:
    """The worker cluster: `mantle serve --workers-only` with `workers` worker processes."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mantle_serve", "--workers-only"],
        cwd=ROOT,
        env=_environment({"MANTLE_ENGINE_WORKERS": str(workers)}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield
    finally:
        _stop(process)
