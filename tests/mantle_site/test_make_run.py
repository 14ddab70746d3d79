"""`make run` started three times on one fresh MANTLE_HOME, as it runs: `mantle migrate`, `mantle
seed-demo`, `mantle serve`, then Ctrl-C as a terminal sends it (SIGINT to the foreground group).
Each time: no traceback in any output, a run of the demo team completes, the first start's API
key and admin password still work, and Ctrl-C leaves no process and no postmaster.pid. On the
last, with the database stopped under it, /readyz answers 503 database_unavailable."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mantle_site import embedded_db
from tests.processes import (
    EMBEDDED_ONLY,
    ROOT,
    alive,
    descendants,
    embedded_env,
    free_port,
    fresh_home,
    postgres_pids,
)

pytestmark = [pytest.mark.slow, EMBEDDED_ONLY]

STARTS = 3
TIMEOUT = 300  # seconds: the first migrate (initdb) on a loaded machine
MANTLE = str(Path(sys.executable).with_name("mantle"))
CREDENTIAL = re.compile(r"^export (\w+)=(\S+)$", re.MULTILINE)


def mantle(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [MANTLE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout


def wait_ready(url: str, serve: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        assert serve.poll() is None, log.read_text()
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"mantle serve not ready:\n{log.read_text()}")


def run_completes(url: str, key: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    admitted = httpx.post(f"{url}/api/v1/run/hello", json={}, headers=headers, timeout=30)
    assert admitted.status_code == 202, admitted.text
    execution = f"{url}/api/v1/executions/{admitted.json()['execution_id']}"
    deadline = time.monotonic() + TIMEOUT
    while (status := httpx.get(execution, headers=headers, timeout=30).json()["status"]) not in {
        "completed",
        "failed",
    }:
        assert time.monotonic() < deadline, status
        time.sleep(0.3)
    assert status == "completed"


def signs_in(url: str, password: str) -> bool:
    with httpx.Client(base_url=url, timeout=30) as browser:
        form = browser.get("/admin/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert token is not None
        answer = browser.post(
            "/admin/login/?next=/admin/",
            data={"csrfmiddlewaretoken": token[1], "username": "admin", "password": password},
        )
        return answer.status_code == 302 and answer.headers["location"] == "/admin/"


def test_make_run_three_times_on_a_fresh_home() -> None:
    with fresh_home() as home:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            **embedded_env(home),
            "MANTLE_SERVER_BIND": f"127.0.0.1:{port}",
            "MANTLE_SERVER_WORKERS": "2",
            "MANTLE_ENGINE_WORKERS": "1",
        }
        pgdata = home / "pgdata"
        first: dict[str, str] = {}
        for start in range(1, STARTS + 1):
            mantle(env, "migrate", "--no-input")
            seeded = mantle(env, "seed-demo")
            saved = dict(CREDENTIAL.findall((home / "credentials").read_text()))
            first = first or saved
            assert saved == first, "a later start changed the credentials"
            assert ("credentials saved in" if start == 1 else "credentials unchanged in") in seeded
            log = home / f"serve-{start}.log"
            with log.open("wb") as output:
                serve = subprocess.Popen(
                    [MANTLE, "serve"],
                    cwd=ROOT,
                    env=env,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a terminal's foreground group of its own
                )
            try:
                wait_ready(url, serve, log)
                run_completes(url, first["MANTLE_KEY"])
                assert signs_in(url, first["MANTLE_ADMIN_PASSWORD"])
                assert "Traceback" not in log.read_text(), log.read_text()
                if start == STARTS:
                    embedded_db.pg_run("pg_ctl", "-w", "-D", str(pgdata), "-m", "fast", "stop")
                    ready = httpx.get(f"{url}/readyz", timeout=30)
                    assert (ready.status_code, ready.json()["error"]) == (
                        503,
                        "database_unavailable",
                    )
                processes = descendants(serve.pid)
                os.killpg(serve.pid, signal.SIGINT)  # Ctrl-C
                assert serve.wait(timeout=TIMEOUT) == 0, log.read_text()
            finally:
                if serve.poll() is None:
                    os.killpg(serve.pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while any(alive(pid) for pid in processes) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert [pid for pid in processes if alive(pid)] == []
            assert not (pgdata / "postmaster.pid").exists()
            assert postgres_pids(pgdata) == []
