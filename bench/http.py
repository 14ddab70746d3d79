"""Figure 2: webhook admission over HTTP (`mantle serve --web-only`, gunicorn) under a flood from
wrk at 32 connections: requests/s as a ratio to figure 1, and p50/p99 latency."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx

from bench import database, fixtures, servers
from bench.report import Report, Row, median
from teams.services import api_key_create

GOAL = 0.50
P99_GOAL_MS = 100.0
CONNECTIONS = 32

LUA = """
wrk.method = "POST"
wrk.body = '{"inputs": {}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(key)s"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %%d %%d %%d %%d %%d %%d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


def _wrk(url: str, key: str, seconds: int) -> tuple[float, float, float, int]:
    """(requests/s, p50 ms, p99 ms, failed requests) of one wrk run."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "post.lua"
        script.write_text(LUA % {"key": key})
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


def run(
    report: Report,
    *,
    hot: list[fixtures.Target],
    direct_rate: float,
    seconds: int,
    rounds: int,
    workers: int,
) -> None:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (as root, `make bench` runs apt-get install wrk)")
    target = hot[0]
    _, key = api_key_create(team=target.team, name="bench")
    rates: list[float] = []
    p50s: list[float] = []
    p99s: list[float] = []
    failed = 0
    with servers.web(workers=workers) as base:
        url = f"{base}/api/v1/run/{target.workflow.name}"
        check = httpx.post(url, json={}, headers={"Authorization": f"Bearer {key}"}, timeout=10)
        if check.status_code != 202 or check.json().get("status") != "pending":
            raise RuntimeError(f"the API did not admit: {check.status_code} {check.text}")
        for _ in range(rounds):
            database.truncate_executions()
            rate, p50, p99, errors = _wrk(url, key, seconds)
            rates.append(rate)
            p50s.append(p50)
            p99s.append(p99)
            failed += errors
    database.truncate_executions()
    ratio = median(rates) / direct_rate
    p99 = median(p99s)
    report.add(
        Row(
            "2 HTTP",
            f"POST /api/v1/run, {CONNECTIONS} connections, {workers} gunicorn workers "
            "(vs figure 1 hot team, open, 16 clients)",
            f"{median(rates):,.0f} /s, p50 {median(p50s):.1f} ms, p99 {p99:.1f} ms",
            f"{direct_rate:,.0f} /s",
            f"{ratio:.2f}",
            f"≥ {GOAL:.2f}, p99 < {P99_GOAL_MS:.0f} ms",
            "yes" if ratio >= GOAL and p99 < P99_GOAL_MS else "NO",
        )
    )
    if failed:
        report.notes.append(f"figure 2: {failed} requests failed (non-2xx or socket errors)")
