"""django-q2 task entry points. Tasks take ids and are idempotent: every claim is conditional,
so a task delivered twice (a retried hand-off, the reaper's re-dispatch) does nothing the
second time."""

from __future__ import annotations

import uuid
from typing import Any

from engine import clock, orchestrator, runner
from executions.services import lifecycle


def run_execution(execution_id: str) -> None:
    """Start a pending execution: pending → running, then its first steps."""
    if lifecycle.execution_start(uuid.UUID(execution_id)):
        orchestrator.advance(uuid.UUID(execution_id))


def run_step(step_id: int) -> None:
    runner.run_step(step_id)


def engine_clock(state: dict[str, Any] | None = None) -> None:
    clock.run(state)
