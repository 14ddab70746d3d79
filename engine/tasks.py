"""django-q2 task entry points. Tasks take ids and are idempotent: every claim is conditional,
so a task delivered twice does nothing the second time.

Executions and steps do not travel through django-q2 (the step workers claim them from their
tables, engine/dispatch.py); `run_execution` and `run_step` run the tasks the previous release
queued."""

from __future__ import annotations

import uuid

from engine import clock, orchestrator
from executions.services import lifecycle, retention


def run_execution(execution_id: str) -> None:
    """Start a pending execution: pending → running, then its first steps."""
    if lifecycle.execution_start(uuid.UUID(execution_id)):
        orchestrator.advance(uuid.UUID(execution_id))


def run_step(step_id: int) -> None:
    """Nothing to do: a pending step is claimed by a step worker, whoever announced it."""


def engine_clock() -> None:
    """The schedule `mantle-engine-clock`: one pass of the clock, unless a step worker runs it."""
    clock.run_once()


def prune() -> None:
    """The schedule `mantle-prune`: the retention pass (idempotent: what is gone stays gone)."""
    retention.prune()
