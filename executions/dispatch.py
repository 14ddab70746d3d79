"""Hand work to the worker cluster (django-q2): after commit, or with the transaction when the
broker is the database itself."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django_q.tasks import async_task


def _enqueue(func: str, args: Iterable[Any], group: str) -> None:
    # django-q2's ORM broker calls close_old_connections() before each enqueue made outside a
    # transaction, which can close this thread's connection. In a transaction it does not, and
    # the tasks of one call are written in one commit. Inside the caller's transaction (admission)
    # no savepoint is needed: a failed enqueue fails the whole admission anyway.
    with transaction.atomic(savepoint=False):
        for arg in args:
            async_task(func, arg, group=group)


def start_executions(execution_ids: Iterable[uuid.UUID]) -> None:
    _enqueue("executions.worker.run_execution", (str(i) for i in execution_ids), "executions")


def start_executions_with_transaction(execution_ids: list[uuid.UUID]) -> None:
    """Dispatch executions being written by the current transaction. With the ORM broker the
    tasks are written in that transaction: they commit with the executions or not at all, and
    cost no commit of their own. A Redis broker is not transactional: after commit."""
    if settings.MANTLE.engine.broker == "orm":
        start_executions(execution_ids)
    else:
        transaction.on_commit(lambda: start_executions(execution_ids))


def start_steps(step_ids: Iterable[int]) -> None:
    _enqueue("executions.worker.run_step", step_ids, "steps")


def start_clock(state: dict[str, Any]) -> None:
    _enqueue("executions.worker.engine_clock", [state], "engine")
