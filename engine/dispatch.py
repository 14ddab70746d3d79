"""Hand steps and the engine clock to the worker cluster (django-q2), after commit."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from executions.services.dispatch import task_enqueue


def start_steps(step_ids: Iterable[int]) -> None:
    task_enqueue("engine.tasks.run_step", step_ids, "steps")


def start_clock(state: dict[str, Any]) -> None:
    task_enqueue("engine.tasks.engine_clock", [state], "engine")
