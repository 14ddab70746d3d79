"""Hand pending executions to the worker cluster (django-q2): after commit, or with the
transaction when the broker is the database itself (admission writes the task in mantle_admit).

The engine's task is named by its dotted path, the string django-q2 stores in the queue:
executions hands work over without importing the engine above it."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django_q.brokers import Broker
from django_q.tasks import async_task

RUN_EXECUTION = "engine.tasks.run_execution"


def task_enqueue(func: str, args: Iterable[Any], group: str) -> None:
    # django-q2's ORM broker calls close_old_connections() before each enqueue made outside a
    # transaction, which can close this thread's connection. In a transaction it does not, and
    # the tasks of one call are written in one commit. Inside the caller's transaction (admission)
    # no savepoint is needed: a failed enqueue fails the whole admission anyway.
    with transaction.atomic(savepoint=False):
        for arg in args:
            async_task(func, arg, group=group)


def execution_dispatch(execution_ids: Iterable[uuid.UUID]) -> None:
    task_enqueue(RUN_EXECUTION, (str(i) for i in execution_ids), "executions")


class _Keep(Broker):
    """A broker that keeps the signed task it is handed instead of sending it."""

    task: str

    def enqueue(self, task: str) -> None:
        self.task = task


def execution_task_build(execution_id: uuid.UUID) -> tuple[str, str] | None:
    """(queue key, signed task) of an execution's start, built by django-q2 itself, for a caller
    that writes it into the ORM broker's queue in its own transaction (mantle_admit does, when
    it admits as pending). None with a Redis broker: execution_dispatch after commit instead."""
    if settings.MANTLE.engine.broker != "orm":
        return None
    kept = _Keep()
    async_task(RUN_EXECUTION, str(execution_id), group="executions", broker=kept)
    return kept.list_key, kept.task
