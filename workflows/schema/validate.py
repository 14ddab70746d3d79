"""Workflow YAML → a validated, typed WorkflowSpec (docs/workflows.md): every error in a document
at once, each with its path and line, and the warnings beside them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

from django.conf import settings

from workflows.actions import action_names
from workflows.expressions import (
    ExpressionError,
    compile_expression,
    find_expressions,
    sole_expression,
)
from workflows.expressions.check import expression_usage
from workflows.expressions.syntax import SyntaxProblem
from workflows.schema.document import (
    Document,
    SchemaError,
    WorkflowInvalid,
    by_line,
    document_read,
    index,
    join,
)
from workflows.schema.flow_control import flow_control_read
from workflows.schema.graph import check_cycles
from workflows.schema.inputs import inputs_read
from workflows.schema.retention import retention_read
from workflows.schema.scope import Scope, scope_problems, scope_warnings
from workflows.schema.spec import RetrySpec, StepSpec, WorkflowSpec
from workflows.schema.step_limits import StepScopeNames, step_scope_read
from workflows.schema.triggers import triggers_read
from workflows.schema.values import ValueReader

UPSTREAM_ONLY_KEYS = frozenset({"credential", "artifacts", "hooks", "token_budget"})

_WORKFLOW_KEYS = frozenset(
    {
        "name",
        "description",
        "inputs",
        "triggers",
        "timeout",
        "max_parallel_executions",
        "on_limit",
        "concurrency_key",
        "max_parallel_per_key",
        "priority",
        "max_queued",
        "queue_timeout",
        "limits",
        "rate_limit",
        "debounce",
        "on_pause",
        "retention",
        "steps",
    }
)
_STEP_KEYS = frozenset(
    {
        "name",
        "action",
        "params",
        "depends_on",
        "if",
        "retry",
        "timeout",
        "continue_on_error",
        "for_each",
        "max_parallel",
        "limits",
        "rate_limit",
    }
)
_RETRY_KEYS = frozenset({"max_attempts", "backoff"})

_WORKFLOW_NAME = re.compile(r"[a-z][a-z0-9-]*")
_STEP_NAME = re.compile(r"[a-z][a-z0-9_-]*")


@dataclass(frozen=True)
class Validated:
    spec: WorkflowSpec
    warnings: list[SchemaError]  # sorted by line


def validate_workflow(
    text: str,
    *,
    actions: frozenset[str] | None = None,
    limit_names: frozenset[str] | None = None,
    step_scope: StepScopeNames | None = None,
    strict: bool = False,
) -> Validated:
    """Parse and validate a workflow document; raise WorkflowInvalid with every error found.

    ``actions`` are the action names steps may use; by default, those of the action registry.
    ``limit_names`` are the named limits of the team it is applied to (None: not checked);
    ``step_scope`` the limits and rates its steps may name (None: not checked).
    ``strict``: every warning is an error too (docs/workflows.md, Warnings)."""
    document = document_read(text)
    validator = _Validator(
        document, action_names() if actions is None else actions, limit_names, step_scope
    )
    spec = validator.workflow()
    errors = document.errors + document.warnings if strict else document.errors
    if errors or spec is None:
        raise WorkflowInvalid(errors)
    return Validated(spec=spec, warnings=by_line(document.warnings))


def parse_workflow(
    text: str,
    *,
    actions: frozenset[str] | None = None,
    limit_names: frozenset[str] | None = None,
    step_scope: StepScopeNames | None = None,
) -> WorkflowSpec:
    """validate_workflow's spec, its warnings left out."""
    return validate_workflow(
        text, actions=actions, limit_names=limit_names, step_scope=step_scope
    ).spec


class _Validator(ValueReader):
    def __init__(
        self,
        document: Document,
        actions: frozenset[str],
        limit_names: frozenset[str] | None,
        step_scope: StepScopeNames | None,
    ) -> None:
        self.doc = document
        self.actions = actions
        self.limit_names = limit_names
        self.step_scope = step_scope
        self.input_names: frozenset[str] = frozenset()
        self.scope = Scope(inputs=frozenset(), steps=frozenset(), step=None, fan_out=False)
        self.references: set[str] = set()  # the steps read by the expressions of one step

    def workflow(self) -> WorkflowSpec | None:
        root = self.doc.value
        if not isinstance(root, dict):
            self.doc.error("", "must be a mapping")
            return None
        self._check_keys(root, "", _WORKFLOW_KEYS)
        name = self._required(root, "name", "")
        if name is not None and not (isinstance(name, str) and _WORKFLOW_NAME.fullmatch(name)):
            self.doc.error("name", "must be kebab-case (^[a-z][a-z0-9-]*$)")
        inputs = inputs_read(self.doc, root["inputs"], self._check_keys) if "inputs" in root else ()
        self.input_names = frozenset(spec.name for spec in inputs)
        triggers = (
            triggers_read(self.doc, root["triggers"], self._check_keys)
            if "triggers" in root
            else ()
        )
        steps = self._steps(root)
        flow = flow_control_read(self.doc, root, self.input_names, self.limit_names)
        retention = retention_read(self.doc, root.get("retention"))
        # The spec is used only when the document has no errors; its casts state what the checks
        # above then established.
        return WorkflowSpec(
            name=cast(str, name),
            description=self._string(root, "description", "", default=""),
            inputs=inputs,
            triggers=triggers,
            timeout=self._duration(root, "timeout", ""),
            max_parallel_executions=self._int(root, "max_parallel_executions", "", minimum=0),
            on_limit=flow.on_limit,
            concurrency_key=flow.concurrency_key,
            max_parallel_per_key=flow.max_parallel_per_key,
            priority=flow.priority,
            max_queued=flow.max_queued,
            queue_timeout=flow.queue_timeout,
            queue_timeout_text=flow.queue_timeout_text,
            limits=flow.limits,
            rate_max=flow.rate.max if flow.rate else 0,
            rate_period=flow.rate.period if flow.rate else 0.0,
            rate_per_key=flow.rate.per_key if flow.rate else False,
            debounce=flow.debounce,
            on_pause=flow.on_pause,
            retention_completed=retention.completed,
            retention_failed=retention.failed,
            steps=steps,
        )

    def _steps(self, root: dict) -> tuple[StepSpec, ...]:
        steps = self._required(root, "steps", "")
        if steps is None:
            return ()
        if not isinstance(steps, list) or not steps:
            self.doc.error("steps", "must be a non-empty list of steps")
            return ()
        limit = settings.MANTLE.limits.workflow_steps
        if len(steps) > limit:
            self.doc.error("steps", f"{len(steps)} steps, over limits.workflow_steps ({limit})")
            return ()
        first_seen: dict[str, int] = {}
        for i, step in enumerate(steps):
            name = step.get("name") if isinstance(step, dict) else None
            if not isinstance(name, str):
                continue
            if name in first_seen:
                line = self.doc.value_lines.get(join(index("steps", first_seen[name]), "name"))
                self.doc.error(
                    join(index("steps", i), "name"),
                    f'duplicate step name "{name}" (first defined on line {line})',
                )
            else:
                first_seen[name] = i
        specs = []
        step_names = frozenset(first_seen)
        for i, step in enumerate(steps):
            spec = self._step(step, index("steps", i), step_names, first_seen)
            if spec is not None:
                specs.append(spec)
        check_cycles(self.doc, specs, first_seen)
        return tuple(specs)

    def _step(
        self, step: object, path: str, step_names: frozenset[str], order: dict[str, int]
    ) -> StepSpec | None:
        if not isinstance(step, dict):
            self.doc.error(path, "must be a mapping")
            return None
        self._check_keys(step, path, _STEP_KEYS)
        name = self._required(step, "name", path)
        if name is not None and not (isinstance(name, str) and _STEP_NAME.fullmatch(name)):
            self.doc.error(join(path, "name"), "must match ^[a-z][a-z0-9_-]*$")
        action = self._required(step, "action", path)
        if action is not None and not (isinstance(action, str) and action in self.actions):
            known = ", ".join(sorted(self.actions))
            self.doc.error(join(path, "action"), f'unknown action "{action}"; known: {known}')
        self.references = set()
        self.scope = Scope(
            inputs=self.input_names, steps=step_names, step=name, fan_out="for_each" in step
        )
        params = step.get("params", {})
        if isinstance(params, dict):
            self._check_expressions(params, join(path, "params"))
        else:
            self.doc.error(join(path, "params"), "must be a mapping")
        self.scope = Scope(inputs=self.input_names, steps=step_names, step=name, fan_out=False)
        for_each = step.get("for_each")
        if "for_each" in step:
            self._check_for_each(for_each, join(path, "for_each"))
        elif "max_parallel" in step:
            # Upstream's own reference example has one (docs/workflows.md, Warnings).
            self.doc.warning(
                join(path, "max_parallel"),
                "is ignored: it bounds the branches of a for_each, and this step has none",
                at_key=True,
            )
        condition = self._condition(step, path)
        explicit = self._depends_on(step, path, name, step_names)
        # A step also depends on every step its expressions read (upstream runs steps in file
        # order, so a step may read any earlier one without depends_on).
        implicit = sorted(self.references.difference(explicit, [name]), key=order.__getitem__)
        return StepSpec(
            name=cast(str, name),
            action=cast(str, action),
            params=params,
            depends_on=(*explicit, *implicit),
            if_=condition,
            retry=self._retry(step, path),
            timeout=self._duration(step, "timeout", path),
            continue_on_error=self._boolean(step, "continue_on_error", path),
            for_each=for_each,
            max_parallel=self._int(step, "max_parallel", path, minimum=0)
            if "for_each" in step
            else 0,
            **step_scope_read(self.doc, step, path, self.step_scope, self.input_names),
        )

    def _depends_on(
        self, step: dict, path: str, name: object, step_names: frozenset[str]
    ) -> tuple[str, ...]:
        value = step.get("depends_on", [])
        path = join(path, "depends_on")
        if not isinstance(value, list):
            self.doc.error(path, "must be a list of step names")
            return ()
        seen: set[str] = set()
        for i, dependency in enumerate(value):
            item_path = index(path, i)
            if not isinstance(dependency, str):
                self.doc.error(item_path, "must be a step name")
            elif dependency == name:
                self.doc.error(item_path, "a step cannot depend on itself")
            elif dependency not in step_names:
                self.doc.error(item_path, f'unknown step "{dependency}"')
            elif dependency in seen:
                self.doc.error(item_path, f'"{dependency}" is listed twice')
            else:
                seen.add(dependency)
        return tuple(value)

    def _condition(self, step: dict, path: str) -> str | None:
        if "if" not in step:
            return None
        path = join(path, "if")
        raw = step["if"]
        if not isinstance(raw, str):
            self.doc.error(path, "must be an expression string")
            return None
        source = sole_expression(raw)
        if source is None:
            if "{{" in raw:
                self.doc.error(path, 'must be one expression, written with or without "{{ }}"')
                return None
            source = raw.strip()
        self._compile(source, path)
        return source

    def _check_for_each(self, value: object, path: str) -> None:
        if isinstance(value, list):
            self._check_expressions(value, path)
        elif isinstance(value, str) and (source := sole_expression(value)) is not None:
            self._compile(source, path)
        else:
            self.doc.error(path, 'must be a list or one "{{ … }}" expression giving a list')

    def _retry(self, step: dict, path: str) -> RetrySpec:
        if "retry" not in step:
            return RetrySpec()
        path = join(path, "retry")
        retry = step["retry"]
        if not isinstance(retry, dict):
            self.doc.error(path, "must be a mapping")
            return RetrySpec()
        self._check_keys(retry, path, _RETRY_KEYS)
        backoff = retry.get("backoff", "fixed")
        if backoff not in ("fixed", "exponential"):
            self.doc.error(join(path, "backoff"), "must be one of: fixed, exponential")
        max_attempts = self._int(retry, "max_attempts", path, minimum=1, default=1)
        return RetrySpec(max_attempts=max_attempts, backoff=backoff)

    def _check_keys(self, mapping: dict, path: str, allowed: frozenset[str]) -> None:
        for key in mapping:
            if key in allowed:
                continue
            if key in UPSTREAM_ONLY_KEYS:
                message = f'"{key}" is not supported by Mantle (upstream-only key)'
            else:
                message = f'unknown key "{key}"'
            self.doc.error(join(path, key), message, at_key=True)

    def _check_expressions(self, value: object, path: str) -> None:
        if isinstance(value, str):
            sources = find_expressions(value)
            for source in sources:
                self._compile(source, path)
            if value.count("{{") > len(sources):
                self.doc.error(path, 'has a "{{" without a closing "}}"')
        elif isinstance(value, dict):
            for key, item in value.items():
                self._check_expressions(item, join(path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self._check_expressions(item, index(path, i))

    def _compile(self, source: str, path: str) -> None:
        """Compile ``source`` and check what it reads and calls against the current scope."""
        try:
            compile_expression(source)
            usage = expression_usage(source)
        except ExpressionError as exc:
            self.doc.error(path, f'invalid expression "{exc.expression}": {exc.message}')
            return
        except SyntaxProblem as exc:
            self.doc.error(path, f'invalid expression "{source}": {exc}')
            return
        for problem in scope_problems(usage, self.scope):
            self.doc.error(path, f'expression "{source}": {problem}')
        for warning in scope_warnings(usage, self.scope, frozenset(settings.MANTLE.env)):
            self.doc.warning(path, f'expression "{source}": {warning}')
        self.references |= usage.steps & self.scope.steps
