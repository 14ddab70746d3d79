"""A witness of every step attempt that outlives any database failover: an HTTP server in the
test process which the steps call (`http/request`, naming their execution and step). It records
when each call began and ended (time.monotonic(): one clock for every network namespace of the
machine), holding the call `hold` seconds (or the call's own `hold`) as the step's work. Two
calls of one step whose intervals overlap are two attempts of that step running at the same
time, which fencing (the step's lease, docs/operations.md, Database failover) must never let
happen."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Call:
    execution: str
    step: str
    started: float
    ended: float


def overlapping(calls: list[Call]) -> list[tuple[Call, Call]]:
    """Pairs of calls of the same step (execution, step) that ran at the same time: each call
    with the one of the latest end among those of its step that began before it."""
    by_step: dict[tuple[str, str], list[Call]] = defaultdict(list)
    for call in calls:
        by_step[call.execution, call.step].append(call)
    found = []
    for runs in by_step.values():
        runs.sort(key=lambda call: call.started)
        latest = runs[0]
        for call in runs[1:]:
            if call.started < latest.ended:
                found.append((latest, call))
            if call.ended > latest.ended:
                latest = call
    return found


class StepWitness(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: str, hold: float) -> None:
        self.hold = hold
        self.calls: list[Call] = []
        self.lock = threading.Lock()
        super().__init__((address, 0), _Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/step"

    def __enter__(self) -> StepWitness:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    def record(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def overlapping(self) -> list[tuple[Call, Call]]:
        with self.lock:
            return overlapping(list(self.calls))

    def runs(self) -> dict[tuple[str, str], int]:
        """Calls per step (execution id, step name): its attempts that reached their work."""
        counted: dict[tuple[str, str], int] = defaultdict(int)
        with self.lock:
            for call in self.calls:
                counted[call.execution, call.step] += 1
        return dict(counted)


class _Handler(BaseHTTPRequestHandler):
    server: StepWitness

    def do_POST(self) -> None:
        started = time.monotonic()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(body.get("hold", self.server.hold))
        self.server.record(Call(body["execution"], body["step"], started, time.monotonic()))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass
