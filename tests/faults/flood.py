"""Closed-loop HTTP clients for the fault tests: each thread posts, records, and posts again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx


@dataclass(frozen=True)
class Result:
    started: float  # time.monotonic()
    seconds: float
    status: int  # 0: no response (a timeout or a refused connection)
    body: dict
    headers: httpx.Headers | None = None


def post(client: httpx.Client, url: str, headers: dict[str, str] | None = None) -> Result:
    started = time.monotonic()
    try:
        response = client.post(url, json={}, headers=headers or {})
    except httpx.HTTPError as exc:
        return Result(started, time.monotonic() - started, 0, {"exception": repr(exc)})
    body = response.json() if response.headers.get("content-type") == "application/json" else {}
    return Result(started, time.monotonic() - started, response.status_code, body, response.headers)


@dataclass
class Flood:
    """`clients` threads, each posting `request()` in a loop until stopped."""

    clients: int
    request: Callable[[httpx.Client, int], Result]
    timeout: float = 10.0
    results: list[Result] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, args=(n,), daemon=True) for n in range(self.clients)
        ]

    def __enter__(self) -> Flood:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        for thread in self._threads:
            thread.join(timeout=self.timeout + 5)
        assert not any(thread.is_alive() for thread in self._threads), "a client hung"

    def _loop(self, n: int) -> None:
        with httpx.Client(timeout=self.timeout) as client:
            while not self._halt.is_set():
                result = self.request(client, n)
                with self._lock:
                    self.results.append(result)


def latencies(client: httpx.Client, url: str, *, seconds: float) -> list[float]:
    """Sequential posts for `seconds` (at least 5), all 202: their latencies in seconds."""
    found: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or len(found) < 5:
        result = post(client, url)
        assert result.status == 202, result
        found.append(result.seconds)
    return found
