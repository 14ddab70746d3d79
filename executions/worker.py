"""The task paths of the previous release, `executions.worker.*`.

django-q2 stores a task's dotted path in every queued task (ORM or Redis broker) and in each
`Schedule.func`. Tasks queued by the previous release still name these paths, so they stay
importable for one release and hand over to engine.tasks (schedules are rewritten at start-up by
engine.schedules.upsert_schedules). The one import from executions up into the engine, made at
call time; remove this module in the next release.
"""

from __future__ import annotations

from typing import Any


def run_execution(execution_id: str) -> None:
    from engine import tasks

    tasks.run_execution(execution_id)


def run_step(step_id: int) -> None:
    from engine import tasks

    tasks.run_step(step_id)


def engine_clock(state: dict[str, Any] | None = None) -> None:
    from engine import tasks

    tasks.engine_clock()
