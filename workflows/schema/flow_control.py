"""The flow-control keys of a workflow (docs/limits.md): what admission and promotion read besides
`max_parallel_executions` — the concurrency key and its limit, the priority, `on_limit`, and
the queue's bounds (`max_queued`, `queue_timeout`), the team's named limits it holds a slot
of (`limits`), its rate limit (`rate_limit: {max, period, per_key}`), `debounce` and `on_pause`.

A concurrency key is a string template over `inputs` and `trigger` (usually one `{{ … }}`), a
priority an int 0-9 and `max_parallel_per_key` a count, each or one such expression; all are
checked here when the workflow is applied and evaluated once per admission
(workflows.admission_values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

from core.bounds import count_problem, duration_problem
from core.durations import parse_duration
from teams.models import NAMED_LIMIT_NAME
from workflows.expressions import (
    ExpressionError,
    compile_expression,
    find_expressions,
    render,
    sole_expression,
)
from workflows.expressions.check import expression_usage
from workflows.expressions.limits import admission_budget
from workflows.expressions.syntax import SyntaxProblem
from workflows.schema.document import Document, index
from workflows.schema.scope import UNDECLARED_INPUT, undeclared_inputs

ON_LIMIT = ("queue", "reject", "cancel_running", "keep_latest")
ON_PAUSE = ("queue", "reject")
PRIORITIES = range(10)
# What a concurrency key expression may read: admission knows nothing else yet.
KEY_VARIABLES = frozenset({"inputs", "trigger"})
_LIMIT_NAME = re.compile(NAMED_LIMIT_NAME)


@dataclass(frozen=True)
class FlowControl:
    on_limit: str = "queue"
    concurrency_key: str | None = None
    max_parallel_per_key: int | str = 0  # or the "{{ … }}" expression as written
    priority: int | str = 0  # or the "{{ … }}" expression as written
    max_queued: int = 0  # 0 = unbounded
    queue_timeout: float | None = None  # seconds
    queue_timeout_text: str | None = None  # as written, for the error that names it
    limits: tuple[str, ...] = ()  # named limits of the team, by name
    rate: RateLimit | None = None
    debounce: float | None = None  # seconds
    on_pause: str = ""  # "" (queue; cron ticks skipped), "queue" or "reject"


@dataclass(frozen=True)
class RateLimit:
    """At most `max` executions become pending in any trailing `period` seconds (of one key
    when `per_key`)."""

    max: int
    period: float
    per_key: bool = False


def flow_control_read(
    doc: Document,
    root: dict,
    input_names: frozenset[str],
    limit_names: frozenset[str] | None = None,
) -> FlowControl:
    """The flow-control keys of the document's root, each error reported at its path.
    `limit_names`: the team's named limits (None: no team, names are not checked)."""
    on_limit = root.get("on_limit") or "queue"  # upstream writes "" for the default
    if on_limit not in ON_LIMIT:
        doc.error("on_limit", "must be one of: " + ", ".join(ON_LIMIT))
    on_pause = root.get("on_pause", "")
    if on_pause not in ("", *ON_PAUSE):
        doc.error("on_pause", "must be one of: " + ", ".join(ON_PAUSE))
    key = root.get("concurrency_key")
    if key is not None:
        check_template(doc, "concurrency_key", key, input_names)
    per_key = _per_key(doc, root.get("max_parallel_per_key", 0), input_names)
    if "max_parallel_per_key" in root and key is None:
        doc.error(
            "max_parallel_per_key", "is only valid together with concurrency_key", at_key=True
        )
    return FlowControl(
        on_limit=on_limit,
        concurrency_key=key if isinstance(key, str) else None,
        max_parallel_per_key=per_key,
        priority=_priority(doc, root.get("priority", 0), input_names),
        max_queued=_count(doc, root, "max_queued"),
        queue_timeout=_timeout(doc, "queue_timeout", root.get("queue_timeout")),
        queue_timeout_text=_as_written(root.get("queue_timeout")),
        limits=_limits(doc, root.get("limits", []), limit_names),
        rate=_rate(doc, root.get("rate_limit"), keyed=key is not None),
        debounce=_timeout(doc, "debounce", root.get("debounce")),
        on_pause=on_pause if on_pause in ON_PAUSE else "",
    )


_RATE_KEYS = frozenset({"max", "period", "per_key"})


def _rate(doc: Document, value: object, *, keyed: bool) -> RateLimit | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        doc.error("rate_limit", "must be a mapping: {max, period, per_key}")
        return None
    for key in sorted(set(value) - _RATE_KEYS):
        doc.error(f"rate_limit.{key}", f'unknown key "{key}"', at_key=True)
    most = value.get("max")
    if problem := count_problem(most, minimum=1):
        doc.error("rate_limit.max", problem)
        most = 1
    period = 1.0
    if "period" not in value:
        doc.missing("rate_limit", "period")
    else:
        try:
            period = parse_duration(value["period"])
        except (TypeError, ValueError) as exc:
            doc.error("rate_limit.period", str(exc))
    if period <= 0:
        doc.error("rate_limit.period", "must be a duration greater than zero")
    elif problem := duration_problem(period):
        doc.error("rate_limit.period", problem)
    per_key = value.get("per_key", False)
    if not isinstance(per_key, bool):
        doc.error("rate_limit.per_key", "must be true or false")
        per_key = False
    elif per_key and not keyed:
        doc.error("rate_limit.per_key", "is only valid together with concurrency_key")
    return RateLimit(max=cast(int, most), period=period, per_key=per_key)


def _limits(doc: Document, value: object, known: frozenset[str] | None) -> tuple[str, ...]:
    if not isinstance(value, list):
        doc.error("limits", "must be a list of named limits of the team")
        return ()
    names: list[str] = []
    for i, name in enumerate(value):
        path = index("limits", i)
        if not (isinstance(name, str) and _LIMIT_NAME.fullmatch(name)):
            doc.error(path, f"must be the name of a named limit (^{NAMED_LIMIT_NAME}$)")
        elif name in names:
            doc.error(path, f"named limit {name!r} is listed twice")
        elif known is not None and name not in known:
            doc.error(path, f"unknown named limit {name!r} (mantle limits set <team> {name} <N>)")
        else:
            names.append(name)
    return tuple(names)


def _count(doc: Document, root: dict, key: str) -> int:
    value = root.get(key, 0)
    if problem := count_problem(value):
        doc.error(key, problem)
        return 0
    return cast(int, value)


def _as_written(value: object) -> str | None:
    """A duration as the YAML wrote it; a plain number is seconds."""
    if value is None:
        return None
    return value if isinstance(value, str) else f"{value}s"


def _timeout(doc: Document, path: str, value: object) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        doc.error(path, str(exc))
        return None
    if seconds <= 0:
        doc.error(path, "must be a duration greater than zero")
        return None
    if problem := duration_problem(seconds):
        doc.error(path, problem)
        return None
    return seconds


def _per_key(doc: Document, value: object, input_names: frozenset[str]) -> int | str:
    """A count, or one expression giving an int >= 1 (docs/limits.md, Per-key limits from an
    expression)."""
    if isinstance(value, str) and (source := sole_expression(value)) is not None:
        errors = len(doc.errors)
        _check_expression(doc, "max_parallel_per_key", source, input_names)
        if len(doc.errors) == errors and not expression_usage(source).variables:
            # Reads neither inputs nor trigger: its one value is known now.
            try:
                with admission_budget():
                    constant = render(value, {})
            except ExpressionError as exc:
                doc.error("max_parallel_per_key", str(exc))
                return value
            if problem := count_problem(constant, minimum=1):
                doc.error("max_parallel_per_key", f"{problem}, got {constant!r}")
        return value
    if problem := count_problem(value):
        doc.error("max_parallel_per_key", problem)
        return 0
    return cast(int, value)


def _priority(doc: Document, value: object, input_names: frozenset[str]) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value in PRIORITIES:
        return value
    if isinstance(value, str) and (source := sole_expression(value)) is not None:
        _check_expression(doc, "priority", source, input_names)
        return value
    doc.error("priority", 'must be an integer from 0 to 9, or one "{{ … }}" expression giving one')
    return 0


def check_template(doc: Document, path: str, value: object, input_names: frozenset[str]) -> bool:
    """Check a string template evaluated at admission (over inputs and trigger); False when it
    added an error."""
    errors = len(doc.errors)
    if not isinstance(value, str) or not value.strip():
        doc.error(path, 'must be a non-empty string, usually one "{{ … }}" expression')
        return False
    sources = find_expressions(value)
    if value.count("{{") > len(sources):
        doc.error(path, 'has a "{{" without a closing "}}"')
    for source in sources:
        _check_expression(doc, path, source, input_names)
    return len(doc.errors) == errors


def _check_expression(doc: Document, path: str, source: str, input_names: frozenset[str]) -> None:
    try:
        with admission_budget():  # evaluated at admission, on a web worker
            compile_expression(source)
        usage = expression_usage(source)
    except ExpressionError as exc:
        doc.error(path, f'invalid expression "{exc.expression}": {exc.message}')
        return
    except SyntaxProblem as exc:
        doc.error(path, f'invalid expression "{source}": {exc}')
        return
    for problem in usage.problems:
        doc.error(path, f'expression "{source}": {problem}')
    for variable in sorted(usage.variables - KEY_VARIABLES):
        message = f'"{variable}" is not in scope here (only inputs and trigger)'
        doc.error(path, f'expression "{source}": {message}')
    for key in undeclared_inputs(usage, input_names):
        doc.warning(path, f'expression "{source}": {UNDECLARED_INPUT.format(key)}')
