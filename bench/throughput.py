"""Admission throughput through `executions.services.admission.execution_admit`: Python threads,
each on its own Django database connection (closed at the end), admitting into random targets of
a fleet."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection, connections

from bench.fixtures import Target
from executions.services.admission import execution_admit


def service(
    targets: list[Target],
    *,
    clients: int,
    seconds: float,
    inputs: Callable[[random.Random], dict[str, Any]] | None = None,
) -> float:
    """Admissions per second over `seconds`, after one warm-up admission per client; `inputs`
    gives each admission's inputs from the client's random generator."""
    barrier = threading.Barrier(clients + 1)
    counts = [0] * clients
    finished = [0.0] * clients
    errors: list[BaseException] = []
    deadline = [0.0]
    go = threading.Event()

    def client(index: int) -> None:
        rng = random.Random(index)
        try:
            connection.ensure_connection()
            execution_admit(
                team=targets[0].team,
                workflow=targets[0].workflow,
                inputs=inputs(rng) if inputs else None,
            )
            barrier.wait(timeout=60)
            go.wait(timeout=60)
            while time.perf_counter() < deadline[0]:
                target = targets[rng.randrange(len(targets))]
                execution_admit(
                    team=target.team,
                    workflow=target.workflow,
                    inputs=inputs(rng) if inputs else None,
                )
                counts[index] += 1
        except BaseException as error:
            errors.append(error)
            barrier.abort()
        finally:
            finished[index] = time.perf_counter()
            connections.close_all()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=60)
    start = time.perf_counter()
    deadline[0] = start + seconds
    go.set()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return sum(counts) / (max(finished) - start)
