"""The peer of figures 5 and 6: DBOS Transact, one process with its defaults, on the same
PostgreSQL (its own system database), running the same scenarios in DBOS's own idioms.

`python -m bench.peer <system database URL> <scenario>…` prints one `RESULT <json>` line per
scenario (a bench.measure.Measure). Workflows without a limit start with `DBOS.start_workflow`
(DBOS runs each in a thread of its unbounded executor); a limit is a queue registered with
`DBOS.register_queue(name, global_concurrency=…)`, polled once a second by default. Each step
notes when it started and ended, in this process.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
from dbos import DBOS, WorkflowHandle

from bench import cpu
from bench.measure import Measure, max_overlap

CLIENTS = 16  # threads submitting, as on Mantle's side
_intervals: list[tuple[float, float]] = []
_lock = threading.Lock()


def _note(started: float) -> None:
    with _lock:
        _intervals.append((started, time.time()))


@DBOS.step()
def fetch(url: str) -> int:
    started = time.time()
    status = httpx.get(url, timeout=30).status_code
    _note(started)
    return status


@DBOS.workflow()
def call(url: str) -> int:
    return fetch(url)


@DBOS.step()
def nothing() -> None:
    _note(time.time())


@DBOS.workflow()
def noop() -> None:
    nothing()


@DBOS.step()
def pause(seconds: float) -> None:
    started = time.time()
    time.sleep(seconds)
    _note(started)


@DBOS.workflow()
def sleeper(seconds: float) -> None:
    pause(seconds)


@DBOS.workflow()
def fan_out(queue: str, branches: int, seconds: float) -> None:
    # DBOS's idiom for a fan-out: a parent workflow enqueues its children and awaits them.
    handles = [DBOS.enqueue_workflow(queue, sleeper, seconds) for _ in range(branches)]
    for handle in handles:
        handle.get_result()


def _submit(count: int, start: Callable[[], WorkflowHandle[object]]) -> tuple[float, int]:
    """(time of the first submission, failed workflows): `count` submissions from CLIENTS
    threads, then every result awaited."""
    _intervals.clear()
    began = time.time()
    with ThreadPoolExecutor(CLIENTS) as pool:
        handles = list(pool.map(lambda _: start(), range(count)))
    failed = 0
    for handle in handles:
        try:
            handle.get_result()
        except Exception:
            failed += 1
    return began, failed


def _measure(count: int, began: float, failed: int) -> Measure:
    intervals = list(_intervals)
    last = max(end for _, end in intervals)
    return Measure(
        count=count,
        seconds=last - began,
        done=count,
        failed=failed,
        max_running=max_overlap(intervals),
    )


def capacity(count: int, url: str) -> Measure:
    began, failed = _submit(count, lambda: DBOS.start_workflow(call, url))
    return _measure(count, began, failed)


def noops(count: int) -> Measure:
    began, failed = _submit(count, lambda: DBOS.start_workflow(noop))
    return _measure(count, began, failed)


def fanout(branches: int, limit: int, seconds: float) -> Measure:
    DBOS.register_queue("bench-fanout", global_concurrency=limit)
    _intervals.clear()
    began = time.time()
    DBOS.start_workflow(fan_out, "bench-fanout", branches, seconds).get_result()
    return _measure(branches, began, 0)


def limited(count: int, limit: int, seconds: float) -> Measure:
    DBOS.register_queue("bench-limited", global_concurrency=limit)
    began, failed = _submit(count, lambda: DBOS.enqueue_workflow("bench-limited", sleeper, seconds))
    return _measure(count, began, failed)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__)
    parser.add_argument("database", help="the DBOS system database URL")
    parser.add_argument("scenarios", help="a JSON list of [name, {arguments}]")
    options = parser.parse_args(argv)
    DBOS(
        config={
            "name": "mantle-bench",
            "system_database_url": options.database,
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    scenarios = {"capacity": capacity, "noops": noops, "fanout": fanout, "limited": limited}
    try:
        for name, arguments in json.loads(options.scenarios):
            database = urlsplit(options.database).path.lstrip("/")
            with cpu.Meter(database=database, own="DBOS") as meter:
                measure = scenarios[name](**arguments)
            measure = Measure(**{**measure.to_json(), "cpu_seconds": meter.seconds})
            print("RESULT " + json.dumps({"scenario": name, **measure.to_json()}), flush=True)
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main(sys.argv[1:])
