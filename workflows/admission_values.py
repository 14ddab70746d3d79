"""The flow-control values of one admission, evaluated once from its inputs and trigger
(docs/limits.md, Per-key limits and fairness): the concurrency key, the priority and a per-key
limit given by an expression. Failures
are the caller's input errors (400 `invalid_inputs`), raised before anything is written."""

from __future__ import annotations

from typing import Any

from core.bounds import count_problem
from workflows.expressions import ExpressionError, render
from workflows.expressions.limits import admission_budget
from workflows.schema import InvalidInputs, WorkflowSpec
from workflows.schema.flow_control import PRIORITIES

MAX_KEY_LENGTH = 200


def concurrency_key_value(
    spec: WorkflowSpec, *, inputs: dict[str, Any], trigger: dict[str, Any]
) -> str:
    """The execution's key; "" when the workflow has none (every execution shares the empty
    key, which no expression can give)."""
    if spec.concurrency_key is None:
        return ""
    try:
        with admission_budget():
            value = render(spec.concurrency_key, {"inputs": inputs, "trigger": trigger})
    except ExpressionError as exc:
        raise InvalidInputs([f"concurrency_key: {exc}"]) from None
    if not isinstance(value, str) or not value:
        shown = repr(value) if value == "" else type(value).__name__
        raise InvalidInputs([f"concurrency_key: must give a non-empty string, got {shown}"])
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidInputs(
            [f"concurrency_key: {len(value)} characters, over the limit of {MAX_KEY_LENGTH}"]
        )
    return value


def priority_value(
    spec: WorkflowSpec, *, inputs: dict[str, Any], trigger: dict[str, Any], given: int | None
) -> int:
    """The execution's priority: `given` (the API's "priority") over the workflow's."""
    if given is not None:
        value: object = given
    elif isinstance(spec.priority, int):
        return spec.priority
    else:
        try:
            with admission_budget():
                value = render(spec.priority, {"inputs": inputs, "trigger": trigger})
        except ExpressionError as exc:
            raise InvalidInputs([f"priority: {exc}"]) from None
    if not isinstance(value, int) or isinstance(value, bool) or value not in PRIORITIES:
        raise InvalidInputs([f"priority: must be an integer from 0 to 9, got {value!r}"])
    return value


def key_limit_value(
    spec: WorkflowSpec, *, inputs: dict[str, Any], trigger: dict[str, Any]
) -> int | None:
    """The execution's own `max_parallel_per_key` when the workflow gives it by an expression
    (docs/limits.md, Per-key limits from an expression); None when it is a plain count, which
    admission and promotion read from the workflow's current version."""
    if isinstance(spec.max_parallel_per_key, int):
        return None
    try:
        with admission_budget():
            value = render(spec.max_parallel_per_key, {"inputs": inputs, "trigger": trigger})
    except ExpressionError as exc:
        raise InvalidInputs([f"max_parallel_per_key: {exc}"]) from None
    if problem := count_problem(value, minimum=1):
        raise InvalidInputs([f"max_parallel_per_key: {problem}, got {value!r}"])
    return value  # type: ignore[return-value]
