"""Hand work to the worker cluster (django-q2). Called after commit only."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django_q.tasks import async_task


def start_executions(execution_ids: Iterable[uuid.UUID]) -> None:
    for execution_id in execution_ids:
        async_task("executions.worker.run_execution", str(execution_id), group="executions")


def start_steps(step_ids: Iterable[int]) -> None:
    for step_id in step_ids:
        async_task("executions.worker.run_step", step_id, group="steps")


def start_clock(state: dict[str, Any]) -> None:
    async_task("executions.worker.engine_clock", state, group="engine")
