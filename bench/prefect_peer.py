"""The peer of figure 10: Prefect 3, its global concurrency limits taken inside a task, against
its own `prefect server start` on the same PostgreSQL (bench.prefect_server starts it).

`python -m bench.prefect_peer <executions> <limit name> <seconds> <deadline>` runs, in one
flow on the default ThreadPoolTaskRunner, `executions` chains of three tasks: a no-op, a task
holding `concurrency(<limit name>, occupy=1)` around `seconds` of work, a no-op; each task
waits on the one before it (`wait_for`), as Prefect's docs submit dependent tasks. It prints
one line, `RESULT <json>`: the chains asked for, those finished within `deadline` seconds of
the first submission and those failed, the time from the first submission to the last
chain's end (or to the deadline), and each limited task's interval (its slot granted, its
release called), read in this process: within the time the server counts the slot held. Past
the deadline it exits without waiting for the rest (the harness then stops the server and drops
its database).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from prefect import flow, task
from prefect.concurrency.sync import concurrency
from prefect.futures import PrefectFuture, wait

_intervals: list[tuple[float, float]] = []
_ends: list[float] = []
_failed: list[str] = []  # why each failed limited task failed
_lock = threading.Lock()


def _note(into: list[float], moment: float) -> None:
    with _lock:
        into.append(moment)


def _failure(error: BaseException) -> None:
    with _lock:
        _failed.append(f"{type(error).__name__}: {error}"[:300])


@task
def before() -> None:
    pass


@task
def work(limit: str, seconds: float) -> None:
    try:
        with concurrency(limit, occupy=1):
            granted = time.time()
            time.sleep(seconds)
            # Read before the release, not after it returns: the server frees the slot during
            # the call, so a waiter may be granted it before the call returns here, and intervals
            # ending after the release overlapped beyond the limit in a loaded run.
            releasing = time.time()
    except BaseException as error:
        _failure(error)
        raise
    with _lock:
        _intervals.append((granted, releasing))


@task
def after() -> None:
    _note(_ends, time.time())


@flow
def chains(executions: int, limit: str, seconds: float) -> None:
    lasts: list[PrefectFuture[None]] = []
    for _ in range(executions):
        first = before.submit()
        middle = work.submit(limit, seconds, wait_for=[first])
        lasts.append(after.submit(wait_for=[middle]))
    wait(lasts)


def main(argv: list[str]) -> None:
    executions, limit = int(argv[0]), argv[1]
    seconds, deadline = float(argv[2]), float(argv[3])
    began = time.time()
    # The flow in a thread of its own: past the deadline, what finished is reported and the
    # process exits without waiting for the flow's task runner to drain.
    flow_thread = threading.Thread(target=chains, args=(executions, limit, seconds), daemon=True)
    flow_thread.start()
    flow_thread.join(timeout=deadline)
    with _lock:
        ends, errors, intervals = list(_ends), list(_failed), list(_intervals)
    finished = not flow_thread.is_alive()
    result = {
        "count": executions,
        "done": len(ends) + len(errors),
        "failed": len(errors),
        "errors": sorted(set(errors))[:3],
        "seconds": (max(ends) if finished and ends else time.time()) - began,
        "intervals": intervals,
    }
    print("RESULT " + json.dumps(result), flush=True)
    if not finished:
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
