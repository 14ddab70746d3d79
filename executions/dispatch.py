"""Hand pending executions to the worker cluster (django-q2). Called after commit only."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django_q.tasks import async_task


def start_executions(execution_ids: Iterable[uuid.UUID]) -> None:
    for execution_id in execution_ids:
        async_task("executions.worker.run_execution", str(execution_id), group="executions")
