"""The peak resident memory (RSS) of one `mantle serve`'s step-worker processes while a scenario
runs, sampled from /proc (Linux) in a thread beside it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
SAMPLE_EVERY = 0.2  # seconds
STEP_WORKER = "mantle_worker"  # in a step worker's command line (mantle_serve's STEP_WORKER)


def _command_line(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _parents() -> dict[int, int]:
    parents = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                # The fields after the command name, which may hold spaces and parentheses.
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parents[int(entry.name)] = int(fields[1])
    return parents


def _rss_mb(pid: int) -> float:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def step_workers(bind: str) -> list[int]:
    """The step-worker processes under the `mantle serve` bound to `bind` (host:port)."""
    parents = _parents()
    serves = {pid for pid in parents if f"--bind {bind}" in _command_line(pid)}
    found, frontier = [], serves
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        found += [pid for pid in frontier if STEP_WORKER in _command_line(pid)]
    return found


@dataclass
class PeakRss:
    """The most RSS seen of any one step worker, in MB."""

    mb: float = 0.0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)


@contextmanager
def peak_rss(bind: str) -> Iterator[PeakRss]:
    """Sample the serve's step workers every SAMPLE_EVERY for the `with` block."""
    peak = PeakRss()
    workers = step_workers(bind)

    def sample() -> None:
        while not peak._stop.wait(SAMPLE_EVERY):
            peak.mb = max([peak.mb, *(_rss_mb(pid) for pid in workers)])
            peak.samples += 1

    sampler = threading.Thread(target=sample, name="rss")
    sampler.start()
    try:
        yield peak
    finally:
        peak._stop.set()
        sampler.join()
