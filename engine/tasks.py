"""django-q2 task entry points of the schedules (engine/schedules.py). Each is idempotent: a pass
that runs twice, or on two machines at once, does nothing the second time that matters."""

from __future__ import annotations

from executions.services import queue_samples, retention


def queue_sample() -> None:
    """The schedule `mantle-queue-samples`: one sample of every live queue."""
    queue_samples.queue_sample_record()


def prune() -> None:
    """The schedule `mantle-prune`: the retention pass (idempotent: what is gone stays gone)."""
    retention.prune()
