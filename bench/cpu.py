"""CPU time (user + system, from /proc) of every process a scenario involves, by part: the
PostgreSQL backends serving one database (any process titled `postgres: … <user> <database> …`,
autovacuum workers of it included), the process trees of given roots (`mantle serve` and every
process it started, each in its own session), and this process itself but for the sampler's own
thread.

A thread samples /proc every INTERVAL seconds and keeps each process's last reading: a process
that starts during the scenario counts from its start, one present at the start from its reading
then, one that exits counts up to its last reading (at most INTERVAL short). The server's shared
processes (checkpointer, WAL writer, other databases' backends) are left out: on a machine where
other databases are busy they would count their work too. Free of Django: the peer's process
(bench.peer) measures itself with it as well. Linux only; elsewhere every part reads 0.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

INTERVAL = 0.1
TICK = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
PROC = Path("/proc")
POSTGRES = "PostgreSQL"
TREES = "serve"
OWN = "submitter"


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, utime + stime in ticks) of a live process."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (2nd field) may hold spaces and parentheses: fields follow its last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])


def _title(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def children(pattern: str) -> list[int]:
    """Pids of this process's children whose command line holds `pattern`."""
    found = []
    for entry in PROC.glob("[0-9]*"):
        stat = _stat(int(entry.name))
        if stat and stat[0] == os.getpid() and pattern in _title(int(entry.name)):
            found.append(int(entry.name))
    return found


class Meter:
    """`with Meter(database=…, roots=…) as meter:` then `meter.seconds`: CPU seconds by part
    (POSTGRES, TREES when roots are given, and this process as `own`)."""

    def __init__(self, *, database: str, roots: Iterable[int] = (), own: str = OWN) -> None:
        self._database = database
        self._own = own
        self._roots = set(roots)
        self._first: dict[int, int] = {}
        self._last: dict[int, tuple[str, int]] = {}
        self._other: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._own_start = 0.0
        self._sampler_seconds = 0.0
        self.seconds: dict[str, float] = {}

    def _part(self, pid: int, parents: dict[int, int]) -> str | None:
        ancestor: int | None = pid
        while ancestor is not None and ancestor > 1:
            known = self._last.get(ancestor)
            if ancestor in self._roots or (known and known[0] == TREES):
                return TREES
            ancestor = parents.get(ancestor)
        title = _title(pid)
        words = title.split()
        # `postgres: [cluster:] user database host(port) activity`
        if words[:1] == ["postgres:"] and self._database in words[1:5]:
            return POSTGRES
        if "bin/postgres" not in title:  # a new backend has its postmaster's title a moment
            self._other.add(pid)
        return None

    def _scan(self) -> None:
        if not PROC.is_dir():
            return
        stats = {}
        for entry in PROC.glob("[0-9]*"):
            pid = int(entry.name)
            if pid not in self._other and pid != os.getpid():
                stat = _stat(pid)
                if stat is not None:
                    stats[pid] = stat
        parents = {pid: parent for pid, (parent, _) in stats.items()}
        for pid, (_, ticks) in sorted(stats.items()):
            known = self._last.get(pid)
            part = known[0] if known else self._part(pid, parents)
            if part is not None:
                self._last[pid] = (part, ticks)

    def _sample(self) -> None:
        began = time.thread_time()
        while not self._stop.wait(INTERVAL):
            self._scan()
        self._sampler_seconds = time.thread_time() - began

    def __enter__(self) -> Meter:
        self._scan()
        self._first = {pid: ticks for pid, (_, ticks) in self._last.items()}
        self._own_start = time.process_time()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._scan()
        own = time.process_time() - self._own_start - self._sampler_seconds
        totals = {POSTGRES: 0.0, **({TREES: 0.0} if self._roots else {}), self._own: own}
        for pid, (part, ticks) in self._last.items():
            totals[part] += (ticks - self._first.get(pid, 0)) * TICK
        self.seconds = totals


def per_execution_ms(seconds: dict[str, float], done: int) -> str:
    """`4.1 ms (PostgreSQL 1.9, serve 1.5, submitter 0.7)`: the sum over `done`, then each part."""
    if not done or not seconds:
        return "n/a"
    parts = ", ".join(f"{part} {value * 1000 / done:.1f}" for part, value in seconds.items())
    return f"{sum(seconds.values()) * 1000 / done:.1f} ms ({parts})"
