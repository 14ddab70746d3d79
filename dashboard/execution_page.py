"""What the dashboard's read-only page of one execution shows: its status and what blocks it,
its inputs and trigger (credentials redacted), its steps a page at a time (keyset by id, as
the API pages them) with their counts, and the YAML of the version it runs."""

from __future__ import annotations

import json
from dataclasses import dataclass

from executions.models import Execution, StepExecution
from executions.selectors import (
    execution_queue_positions,
    execution_step_counts,
    execution_steps,
)
from executions.services.admission import blocked_by_name
from workflows.redaction import content_redacted, json_redacted

# The API's page of steps (GET /api/v1/executions/<id>/steps, its default limit).
STEPS_PER_PAGE = 50
TOO_DEEP = "(nested too deeply to show)"


@dataclass(frozen=True)
class ShownStep:
    step: StepExecution
    output: str  # JSON, credentials redacted


@dataclass(frozen=True)
class ExecutionPage:
    execution: Execution
    queue_position: int | None  # in its workflow's queue, as the API's queue_position
    blocked_by_name: str | None
    inputs: str
    trigger: str
    step_counts: dict[str, int]
    steps: list[ShownStep]
    next_after: int | None  # the `after` of the next page of steps, when there may be one
    content: str  # the version's YAML, webhook secrets redacted


def execution_page(*, execution: Execution, after: int | None) -> ExecutionPage:
    steps = execution_steps(execution=execution, limit=STEPS_PER_PAGE, after=after)
    return ExecutionPage(
        execution=execution,
        queue_position=execution_queue_positions(executions=[execution]).get(execution.id),
        blocked_by_name=blocked_by_name(execution),
        inputs=_shown(execution.inputs),
        trigger=_shown(execution.trigger),
        step_counts=execution_step_counts(execution=execution),
        steps=[ShownStep(step, _shown(step.output)) for step in steps],
        next_after=steps[-1].id if len(steps) == STEPS_PER_PAGE else None,
        content=content_redacted(execution.version.content),
    )


def _shown(value: object) -> str:
    """A JSON value as the page shows it: credentials redacted, indented."""
    try:
        return json.dumps(json_redacted(value), indent=2, ensure_ascii=False, sort_keys=True)
    except RecursionError:
        return TOO_DEEP
