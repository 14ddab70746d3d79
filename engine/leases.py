"""The leases of a step worker's attempts (engine/worker.py): what a renewal answers of each, and
self-fencing. Every heartbeat one statement renews the leases of all the attempts the process
holds and reads their executions' status: an attempt whose lease was taken over is abandoned
without a write, one whose execution ended is cancelled. An attempt whose lease the process
could not renew in time (the database unreachable, a failover) is stopped before the lease can
run out: the reaper retries it only after the lease, so the two attempts never run at once
(docs/operations.md, Database failover)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.conf import settings

from engine import dispatch, runner
from executions.models import Status, StepStatus

logger = logging.getLogger(__name__)


def new_owner() -> str:
    """A worker process's name on the leases it holds: its host, pid and a nonce (a restarted
    process with a reused pid is another owner)."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# An attempt whose lease could not be renewed stops this long before the lease can run out (at
# most a tenth of the lease: a short lease's renewal, slow but answered, is not cut short).
FENCE_MARGIN = 2.0


@dataclass
class Held:
    claim: dispatch.Claim
    limited: bool  # claimed by the limit-aware claim: it holds step-scope limits
    action: asyncio.Task[runner.Outcome] | None = None
    stopped: bool = False
    # Why the attempt was stopped: the outcome to settle, or None to walk away (the lease was
    # taken over or could not be renewed, or the worker is stopping and hands the step back).
    verdict: runner.Outcome | None = None
    # When the lease was last known renewed: time.monotonic() before the claim was answered or
    # the renewal asked (the database's own start of the lease is no earlier).
    renewed: float = field(default_factory=time.monotonic)


Halt = Callable[[Held, "runner.Outcome | None"], None]


def renewed(
    held: dict[int, Held],
    snapshot: dict[int, int],
    statuses: dict[int, str],
    asked: float,
    halt: Halt,
) -> None:
    """Apply a renewal asked at `asked` for `snapshot` ({step id: attempt}) that answered
    `statuses` ({step id: its execution's status} for the leases still held)."""
    for step_id, attempt in snapshot.items():
        one = held.get(step_id)
        if one is None or one.claim.attempt != attempt or one.stopped:
            continue
        status = statuses.get(step_id)
        if status is None:
            halt(one, None)
        elif status != Status.RUNNING:
            error = f"execution {status}"
            halt(one, runner.Outcome(StepStatus.CANCELLED, error=error, retryable=False))
        else:
            one.renewed = asked


def fence(held: Iterable[Held], halt: Halt, *, owner: str) -> None:
    """Stop the attempts whose lease may run out before it can be renewed."""
    lease = settings.MANTLE.engine.step_lease
    deadline = time.monotonic() - lease + min(FENCE_MARGIN, lease / 10)
    for one in list(held):
        if not one.stopped and one.renewed < deadline:
            logger.warning(
                "step %s attempt %s: lease not renewed in time, stopped by %s",
                one.claim.id,
                one.claim.attempt,
                owner,
            )
            halt(one, None)
