"""Figure 2: admission over HTTP (`mantle serve --web-only` with its default web workers) under a
flood from wrk at 32 connections, through the API (`POST /api/v1/run/<workflow>`, an API key) and
a webhook (`POST /hooks/<path>`, no key): requests/s as a ratio to figure 1's hot team (16
clients admitting in-process), and p50/p99 latency. Each round measures the reference, then the
two endpoints, so a machine whose load drifts moves both sides of the ratio alike."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx

from bench import database, fixtures, servers, throughput
from bench.report import Report, Row, median
from teams.services import api_key_create
from workflows.services import workflow_apply

GOAL = 0.60
HOOK = "/hooks/bench-hot"
P99_GOAL_MS = 100.0
CONNECTIONS = 32
REFERENCE_CLIENTS = 16

LUA = """
wrk.method = "POST"
wrk.body = '{"inputs": {}}'
wrk.headers["Content-Type"] = "application/json"
%(authorization)s
done = function(summary, latency, requests)
  io.write(string.format("RESULT %%d %%d %%d %%d %%d %%d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


def _wrk(url: str, key: str | None, seconds: int) -> tuple[float, float, float, int]:
    """(requests/s, p50 ms, p99 ms, failed requests) of one wrk run."""
    authorization = f'wrk.headers["Authorization"] = "Bearer {key}"' if key else ""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "post.lua"
        script.write_text(LUA % {"authorization": authorization})
        result = subprocess.run(
            ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "-s", str(script), url],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
        )
    found = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", result.stdout)
    if not found:
        raise RuntimeError(f"wrk failed:\n{result.stdout}\n{result.stderr}")
    requests, micros, p50, p99, bad_status, socket_errors = map(int, found.groups())
    return requests / micros * 1e6, p50 / 1000, p99 / 1000, bad_status + socket_errors


def _hook_workflow(target: fixtures.Target) -> None:
    """A no-op workflow of the hot team with a webhook trigger on HOOK (unchanged: no new
    version)."""
    workflow_apply(
        team=target.team,
        content=fixtures.workflow_yaml("hook", 0).replace(
            "steps:", f"triggers:\n  - type: webhook\n    path: {HOOK}\n    auth: none\nsteps:"
        ),
    )


def _check(url: str, key: str | None) -> None:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    answer = httpx.post(url, json={"inputs": {}} if key else {}, headers=headers, timeout=10)
    if answer.status_code != 202 or answer.json().get("status") != "pending":
        raise RuntimeError(f"{url} did not admit: {answer.status_code} {answer.text}")


def run(
    report: Report,
    *,
    hot: list[fixtures.Target],
    seconds: int,
    rounds: int,
    workers: int | None,
) -> None:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (as root, `make bench` runs apt-get install wrk)")
    target = hot[0]
    _, key = api_key_create(team=target.team, name="bench")
    _hook_workflow(target)
    endpoints = {
        "POST /api/v1/run": (f"/api/v1/run/{target.workflow.name}", key),
        "POST /hooks/<path>": (HOOK, None),
    }
    measured: dict[str, list[tuple[float, float, float]]] = {name: [] for name in endpoints}
    references: list[float] = []
    failed = 0
    with servers.web(workers=workers) as base:
        for path, auth in endpoints.values():
            _check(base + path, auth)
        for _ in range(rounds):
            database.truncate_executions()
            references.append(throughput.service(hot, clients=REFERENCE_CLIENTS, seconds=seconds))
            for name, (path, auth) in endpoints.items():
                database.truncate_executions()
                rate, p50, p99, errors = _wrk(base + path, auth, seconds)
                measured[name].append((rate, p50, p99))
                failed += errors
    database.truncate_executions()
    server = f"{workers} gunicorn workers" if workers else "the default web workers"
    direct_rate = median(references)
    for name, runs in measured.items():
        rate, p50, p99 = (median([run[i] for run in runs]) for i in range(3))
        ratio = rate / direct_rate
        report.add(
            Row(
                "2 HTTP",
                f"{name}, {CONNECTIONS} connections, {server} "
                f"(vs the hot team, open, {REFERENCE_CLIENTS} clients in-process, same rounds)",
                f"{rate:,.0f} /s, p50 {p50:.1f} ms, p99 {p99:.1f} ms",
                f"{direct_rate:,.0f} /s",
                f"{ratio:.2f}",
                f"≥ {GOAL:.2f}, p99 < {P99_GOAL_MS:.0f} ms",
                "yes" if ratio >= GOAL and p99 < P99_GOAL_MS else "NO",
            )
        )
    if failed:
        report.notes.append(f"figure 2: {failed} requests failed (non-2xx or socket errors)")
