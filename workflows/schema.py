"""Workflow YAML → a validated, typed WorkflowSpec (CONTRACT.md §3).

The YAML is composed into nodes rather than loaded, so every error carries the line of the
offending key or value, and every error in a document is reported at once, sorted by line.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field

import yaml
from croniter import croniter

from core.durations import parse_duration
from workflows.expressions import (
    ExpressionError,
    compile_expression,
    find_expressions,
    sole_expression,
)

DEFAULT_ACTIONS = frozenset({"http/request", "test/noop", "test/echo", "test/sleep", "test/fail"})
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
    }
)
_INPUT_KEYS = frozenset({"type", "description", "default"})
_RETRY_KEYS = frozenset({"max_attempts", "backoff"})
_WEBHOOK_KEYS = frozenset({"type", "path", "secret"})
_CRON_KEYS = frozenset({"type", "schedule"})

_WORKFLOW_NAME = re.compile(r"[a-z][a-z0-9-]*")
_STEP_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WEBHOOK_PATH = re.compile(
    r"/hooks/[A-Za-z0-9_-][A-Za-z0-9._~-]*(?:/[A-Za-z0-9_-][A-Za-z0-9._~-]*)*"
)

_MAX_NODES = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Kept as their text: dates and bytes are not JSON, and the spec is stored in a JSONField.
_TEXT_TAGS = frozenset({"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"})


def _is_string(value: object) -> bool:
    return isinstance(value, str)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_boolean(value: object) -> bool:
    return isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# input type → (check, what the error says it must be)
_INPUT_TYPES = {
    "string": (_is_string, "a string"),
    "number": (_is_number, "a number"),
    "boolean": (_is_boolean, "a boolean"),
}


@dataclass(frozen=True)
class SchemaError:
    path: str
    message: str
    line: int | None

    def __str__(self) -> str:
        parts = [f"line {self.line}"] if self.line is not None else []
        if self.path:
            parts.append(self.path)
        parts.append(self.message)
        return ": ".join(parts)


class WorkflowInvalid(Exception):
    """Every error found in a workflow document, sorted by line."""

    def __init__(self, errors: list[SchemaError]) -> None:
        self.errors = sorted(errors, key=lambda error: error.line or 0)
        super().__init__("\n".join(str(error) for error in self.errors))

    def __reduce__(self) -> tuple[object, tuple[list[SchemaError]]]:
        return type(self), (self.errors,)


class InvalidInputs(Exception):
    """Inputs given to a run do not match the workflow's declared inputs."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))

    def __reduce__(self) -> tuple[object, tuple[list[str]]]:
        return type(self), (self.errors,)


@dataclass(frozen=True, kw_only=True)
class InputSpec:
    name: str
    type: str
    description: str = ""
    default: object = None
    has_default: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "type": self.type,
            "description": self.description,
            "default": copy.deepcopy(self.default),
            "has_default": self.has_default,
        }


@dataclass(frozen=True, kw_only=True)
class TriggerSpec:
    type: str  # "webhook" (path, secret) or "cron" (schedule)
    path: str | None = None
    secret: str | None = None
    schedule: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "type": self.type,
            "path": self.path,
            "secret": self.secret,
            "schedule": self.schedule,
        }


@dataclass(frozen=True, kw_only=True)
class RetrySpec:
    max_attempts: int = 1
    backoff: str = "fixed"  # or "exponential"


@dataclass(frozen=True, kw_only=True)
class StepSpec:
    name: str
    action: str
    params: dict[str, object] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    if_: str | None = None  # the bare CEL expression, braces removed
    retry: RetrySpec = RetrySpec()
    timeout: float | None = None  # seconds
    continue_on_error: bool = False
    for_each: list | str | None = None  # a list, or the "{{ … }}" string as written
    max_parallel: int = 0  # 0 = every branch at once

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "action": self.action,
            "params": copy.deepcopy(self.params),
            "depends_on": list(self.depends_on),
            "if": self.if_,
            "retry": {"max_attempts": self.retry.max_attempts, "backoff": self.retry.backoff},
            "timeout": self.timeout,
            "continue_on_error": self.continue_on_error,
            "for_each": copy.deepcopy(self.for_each),
            "max_parallel": self.max_parallel,
        }

    @classmethod
    def from_dict(cls, data: dict) -> StepSpec:
        return cls(
            name=data["name"],
            action=data["action"],
            params=copy.deepcopy(data["params"]),
            depends_on=tuple(data["depends_on"]),
            if_=data["if"],
            retry=RetrySpec(**data["retry"]),
            timeout=data["timeout"],
            continue_on_error=data["continue_on_error"],
            for_each=copy.deepcopy(data["for_each"]),
            max_parallel=data["max_parallel"],
        )


@dataclass(frozen=True, kw_only=True)
class WorkflowSpec:
    name: str
    description: str = ""
    inputs: tuple[InputSpec, ...] = ()
    triggers: tuple[TriggerSpec, ...] = ()
    timeout: float | None = None  # seconds
    max_parallel_executions: int = 0  # 0 = unlimited
    on_limit: str = "queue"  # or "reject"
    steps: tuple[StepSpec, ...]

    def to_dict(self) -> dict[str, object]:
        """A JSON-serialisable dict; ``from_dict`` turns it back into an equal spec."""
        return {
            "name": self.name,
            "description": self.description,
            "inputs": [spec.to_dict() for spec in self.inputs],
            "triggers": [spec.to_dict() for spec in self.triggers],
            "timeout": self.timeout,
            "max_parallel_executions": self.max_parallel_executions,
            "on_limit": self.on_limit,
            "steps": [step.to_dict() for step in self.steps],
        }

    @classmethod
    def from_dict(cls, data: dict) -> WorkflowSpec:
        return cls(
            name=data["name"],
            description=data["description"],
            inputs=tuple(InputSpec(**copy.deepcopy(item)) for item in data["inputs"]),
            triggers=tuple(TriggerSpec(**item) for item in data["triggers"]),
            timeout=data["timeout"],
            max_parallel_executions=data["max_parallel_executions"],
            on_limit=data["on_limit"],
            steps=tuple(StepSpec.from_dict(item) for item in data["steps"]),
        )


def validate_inputs(spec: WorkflowSpec, given: dict | None) -> dict:
    """The run's inputs with defaults applied, or InvalidInputs naming every bad input."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise InvalidInputs(["inputs: must be an object"])
    declared = {item.name for item in spec.inputs}
    errors = [f"inputs.{name}: unknown input" for name in given if name not in declared]
    result: dict[str, object] = {}
    for item in spec.inputs:
        if item.name in given:
            check, expected = _INPUT_TYPES[item.type]
            if check(given[item.name]):
                result[item.name] = given[item.name]
            else:
                errors.append(f"inputs.{item.name}: must be {expected}")
        elif item.has_default:
            result[item.name] = copy.deepcopy(item.default)
        else:
            errors.append(f"inputs.{item.name}: is required")
    if errors:
        raise InvalidInputs(errors)
    return result


def parse_workflow(text: str, *, actions: frozenset[str] = DEFAULT_ACTIONS) -> WorkflowSpec:
    """Parse and validate a workflow document; raise WorkflowInvalid with every error found."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = f"invalid YAML: {exc.problem or exc.context}"
        line = mark.line + 1 if mark is not None else None
        raise WorkflowInvalid([SchemaError(path="", message=message, line=line)]) from None
    except yaml.YAMLError as exc:
        raise WorkflowInvalid(
            [SchemaError(path="", message=f"invalid YAML: {exc}", line=None)]
        ) from None
    if root is None:
        raise WorkflowInvalid([SchemaError(path="", message="must be a mapping", line=1)])
    document = _Document(root)
    spec = _Validator(document, actions).workflow()
    if document.errors or spec is None:
        raise WorkflowInvalid(document.errors)
    return spec


class _Document:
    """Plain Python values of a composed YAML document, with the line of every key and value.

    Lines are kept by path (``steps[2].timeout``) so validation can work on plain values.
    """

    def __init__(self, root: yaml.Node) -> None:
        self.errors: list[SchemaError] = []
        self.value_lines: dict[str, int] = {}
        self.key_lines: dict[str, int] = {}
        self._constructor = yaml.SafeLoader("")
        self._reading: set[int] = set()  # ids of nodes being read: an alias may point back up
        self._merged: set[int] = set()  # ids of mappings already checked and flattened
        self._budget = _MAX_NODES
        self.value = self._read(root, "")

    def error(self, path: str, message: str, *, at_key: bool = False) -> None:
        if at_key:
            line = self.key_lines.get(path, self.value_lines.get(path))
        else:
            line = self.value_lines.get(path, self.key_lines.get(path))
        self.errors.append(SchemaError(path=path, message=message, line=line))

    def missing(self, parent: str, key: str) -> None:
        """A required key is absent: report it at the line where its mapping starts."""
        line = self.value_lines.get(parent)
        self.errors.append(SchemaError(path=_join(parent, key), message="is required", line=line))

    def _read(self, node: yaml.Node, path: str) -> object:
        self.value_lines[path] = node.start_mark.line + 1
        # Aliases are expanded, so a few lines can stand for an exponential number of nodes.
        self._budget -= 1
        if self._budget == 0:
            self.error(path, f"the document expands to more than {_MAX_NODES} values")
        if self._budget <= 0:
            return None
        if id(node) in self._reading:
            self.error(path, "an alias may not refer to a node that contains it")
            return None
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            self._reading.add(id(node))
            try:
                if isinstance(node, yaml.MappingNode):
                    return self._read_mapping(node, path)
                return [self._read(child, _index(path, i)) for i, child in enumerate(node.value)]
            finally:
                self._reading.discard(id(node))
        if node.tag in _TEXT_TAGS:
            return node.value
        try:
            value = self._constructor.construct_object(node)
        except yaml.MarkedYAMLError as exc:
            self.error(path, str(exc.problem))
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.error(path, "must be a finite number")
        return value

    def _read_mapping(self, node: yaml.MappingNode, path: str) -> dict[str, object]:
        # Duplicates are judged on the keys as written: after "<<" merges are flattened in,
        # a key that overrides a merged one would look like a duplicate.
        if id(node) not in self._merged:
            self._check_mapping_keys(node, path)
            self._merged.add(id(node))
        result: dict[str, object] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node)
            if key is None:
                continue
            child = _join(path, key)
            self.key_lines[child] = key_node.start_mark.line + 1
            result[key] = self._read(value_node, child)
        return result

    def _check_mapping_keys(self, node: yaml.MappingNode, path: str) -> None:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self._key(key_node)
            line = key_node.start_mark.line + 1
            if key is None:
                message = "keys must be strings (quote the key)"
                self.errors.append(SchemaError(path=path, message=message, line=line))
            elif key in seen:
                message = f'duplicate key "{key}"'
                self.errors.append(SchemaError(path=_join(path, key), message=message, line=line))
            seen.add(key)
        try:
            self._constructor.flatten_mapping(node)
        except yaml.MarkedYAMLError as exc:
            self.error(path, str(exc.problem))

    def _key(self, node: yaml.Node) -> str | None:
        if not isinstance(node, yaml.ScalarNode):
            return None
        try:
            key = self._constructor.construct_object(node)
        except yaml.MarkedYAMLError:
            return None
        return key if isinstance(key, str) else None


class _Validator:
    def __init__(self, document: _Document, actions: frozenset[str]) -> None:
        self.doc = document
        self.actions = actions

    def workflow(self) -> WorkflowSpec | None:
        root = self.doc.value
        if not isinstance(root, dict):
            self.doc.error("", "must be a mapping")
            return None
        self._check_keys(root, "", _WORKFLOW_KEYS)
        name = self._required(root, "name", "")
        if name is not None and not (isinstance(name, str) and _WORKFLOW_NAME.fullmatch(name)):
            self.doc.error("name", "must be kebab-case (^[a-z][a-z0-9-]*$)")
        inputs = self._inputs(root["inputs"]) if "inputs" in root else ()
        triggers = self._triggers(root["triggers"]) if "triggers" in root else ()
        steps = self._steps(root)
        on_limit = root.get("on_limit", "queue")
        if on_limit not in ("queue", "reject"):
            self.doc.error("on_limit", "must be one of: queue, reject")
        return WorkflowSpec(
            name=name,
            description=self._string(root, "description", "", default=""),
            inputs=inputs,
            triggers=triggers,
            timeout=self._duration(root, "timeout", ""),
            max_parallel_executions=self._int(root, "max_parallel_executions", "", minimum=0),
            on_limit=on_limit,
            steps=steps,
        )

    def _inputs(self, value: object) -> tuple[InputSpec, ...]:
        if not isinstance(value, dict):
            self.doc.error("inputs", "must be a mapping of input name to definition")
            return ()
        specs = []
        for name, definition in value.items():
            path = _join("inputs", name)
            if not _INPUT_NAME.fullmatch(name):
                self.doc.error(
                    path, "must be an identifier (^[A-Za-z_][A-Za-z0-9_]*$)", at_key=True
                )
            if not isinstance(definition, dict):
                self.doc.error(path, "must be a mapping with a type")
                continue
            self._check_keys(definition, path, _INPUT_KEYS)
            input_type = self._required(definition, "type", path)
            if input_type is not None and not (
                isinstance(input_type, str) and input_type in _INPUT_TYPES
            ):
                self.doc.error(_join(path, "type"), "must be one of: string, number, boolean")
                input_type = None
            has_default = "default" in definition
            if has_default and input_type is not None:
                check, expected = _INPUT_TYPES[input_type]
                if not check(definition["default"]):
                    self.doc.error(_join(path, "default"), f"must be {expected}")
            specs.append(
                InputSpec(
                    name=name,
                    type=input_type,
                    description=self._string(definition, "description", path, default=""),
                    default=definition.get("default"),
                    has_default=has_default,
                )
            )
        return tuple(specs)

    def _triggers(self, value: object) -> tuple[TriggerSpec, ...]:
        if not isinstance(value, list):
            self.doc.error("triggers", "must be a list")
            return ()
        specs = []
        webhook_paths: set[str] = set()
        for i, trigger in enumerate(value):
            path = _index("triggers", i)
            if not isinstance(trigger, dict):
                self.doc.error(path, "must be a mapping")
                continue
            trigger_type = self._required(trigger, "type", path)
            if trigger_type == "webhook":
                self._check_keys(trigger, path, _WEBHOOK_KEYS)
                hook_path = self._required(trigger, "path", path)
                if hook_path is not None and not (
                    isinstance(hook_path, str) and _WEBHOOK_PATH.fullmatch(hook_path)
                ):
                    self.doc.error(
                        _join(path, "path"),
                        "must be a path like /hooks/<name> "
                        '(letters, digits, "-", "_", ".", "~" and "/")',
                    )
                elif hook_path is not None:
                    if hook_path in webhook_paths:
                        message = f'duplicate webhook path "{hook_path}"'
                        self.doc.error(_join(path, "path"), message)
                    webhook_paths.add(hook_path)
                secret = trigger.get("secret")
                if "secret" in trigger and not (isinstance(secret, str) and secret):
                    self.doc.error(_join(path, "secret"), "must be a non-empty string")
                specs.append(TriggerSpec(type="webhook", path=hook_path, secret=secret))
            elif trigger_type == "cron":
                self._check_keys(trigger, path, _CRON_KEYS)
                schedule = self._required(trigger, "schedule", path)
                if schedule is not None and not (
                    isinstance(schedule, str)
                    and len(schedule.split()) == 5
                    and croniter.is_valid(schedule)
                ):
                    self.doc.error(
                        _join(path, "schedule"),
                        'must be a cron schedule of 5 fields, like "*/5 * * * *"',
                    )
                specs.append(TriggerSpec(type="cron", schedule=schedule))
            elif trigger_type is not None:
                self.doc.error(_join(path, "type"), "must be one of: webhook, cron")
        return tuple(specs)

    def _steps(self, root: dict) -> tuple[StepSpec, ...]:
        steps = self._required(root, "steps", "")
        if steps is None:
            return ()
        if not isinstance(steps, list) or not steps:
            self.doc.error("steps", "must be a non-empty list of steps")
            return ()
        first_seen: dict[str, int] = {}
        for i, step in enumerate(steps):
            name = step.get("name") if isinstance(step, dict) else None
            if not isinstance(name, str):
                continue
            if name in first_seen:
                line = self.doc.value_lines.get(_join(_index("steps", first_seen[name]), "name"))
                self.doc.error(
                    _join(_index("steps", i), "name"),
                    f'duplicate step name "{name}" (first defined on line {line})',
                )
            else:
                first_seen[name] = i
        specs = []
        for i, step in enumerate(steps):
            spec = self._step(step, _index("steps", i), set(first_seen))
            if spec is not None:
                specs.append(spec)
        self._check_cycles(specs, first_seen)
        return tuple(specs)

    def _step(self, step: object, path: str, step_names: set[str]) -> StepSpec | None:
        if not isinstance(step, dict):
            self.doc.error(path, "must be a mapping")
            return None
        self._check_keys(step, path, _STEP_KEYS)
        name = self._required(step, "name", path)
        if name is not None and not (isinstance(name, str) and _STEP_NAME.fullmatch(name)):
            self.doc.error(_join(path, "name"), "must match ^[a-z][a-z0-9_-]*$")
        action = self._required(step, "action", path)
        if action is not None and not (isinstance(action, str) and action in self.actions):
            known = ", ".join(sorted(self.actions))
            self.doc.error(_join(path, "action"), f'unknown action "{action}"; known: {known}')
        params = step.get("params", {})
        if isinstance(params, dict):
            self._check_expressions(params, _join(path, "params"))
        else:
            self.doc.error(_join(path, "params"), "must be a mapping")
        for_each = step.get("for_each")
        if "for_each" in step:
            self._check_for_each(for_each, _join(path, "for_each"))
        elif "max_parallel" in step:
            self.doc.error(
                _join(path, "max_parallel"), "is only valid together with for_each", at_key=True
            )
        return StepSpec(
            name=name,
            action=action,
            params=params,
            depends_on=self._depends_on(step, path, name, step_names),
            if_=self._condition(step, path),
            retry=self._retry(step, path),
            timeout=self._duration(step, "timeout", path),
            continue_on_error=self._boolean(step, "continue_on_error", path),
            for_each=for_each,
            max_parallel=self._int(step, "max_parallel", path, minimum=0),
        )

    def _depends_on(
        self, step: dict, path: str, name: object, step_names: set[str]
    ) -> tuple[str, ...]:
        value = step.get("depends_on", [])
        path = _join(path, "depends_on")
        if not isinstance(value, list):
            self.doc.error(path, "must be a list of step names")
            return ()
        seen: set[str] = set()
        for i, dependency in enumerate(value):
            item_path = _index(path, i)
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
        path = _join(path, "if")
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
        elif isinstance(value, str) and sole_expression(value) is not None:
            self._compile(sole_expression(value), path)
        else:
            self.doc.error(path, 'must be a list or one "{{ … }}" expression giving a list')

    def _retry(self, step: dict, path: str) -> RetrySpec:
        if "retry" not in step:
            return RetrySpec()
        path = _join(path, "retry")
        retry = step["retry"]
        if not isinstance(retry, dict):
            self.doc.error(path, "must be a mapping")
            return RetrySpec()
        self._check_keys(retry, path, _RETRY_KEYS)
        backoff = retry.get("backoff", "fixed")
        if backoff not in ("fixed", "exponential"):
            self.doc.error(_join(path, "backoff"), "must be one of: fixed, exponential")
        max_attempts = self._int(retry, "max_attempts", path, minimum=1, default=1)
        return RetrySpec(max_attempts=max_attempts, backoff=backoff)

    def _check_cycles(self, steps: list[StepSpec], order: dict[str, int]) -> None:
        """One error per strongly connected group of steps, naming one cycle in run order."""
        dependencies = {
            step.name: {
                d for d in step.depends_on if isinstance(d, str) and d in order and d != step.name
            }
            for step in steps
            if isinstance(step.name, str) and order.get(step.name) is not None
        }
        reachable = {name: _reachable(name, dependencies) for name in dependencies}
        reported: set[str] = set()
        for name in sorted(dependencies, key=order.__getitem__):
            if name in reported or name not in reachable[name]:
                continue
            group = {other for other in reachable[name] if name in reachable[other]}
            reported |= group
            cycle = _shortest_cycle(name, dependencies, group)
            self.doc.error(
                _join(_index("steps", order[name]), "depends_on"),
                "cycle: " + " -> ".join(cycle),
            )

    def _check_keys(self, mapping: dict, path: str, allowed: frozenset[str]) -> None:
        for key in mapping:
            if key in allowed:
                continue
            if key in UPSTREAM_ONLY_KEYS:
                message = f'"{key}" is not supported by Mantle (upstream-only key)'
            else:
                message = f'unknown key "{key}"'
            self.doc.error(_join(path, key), message, at_key=True)

    def _check_expressions(self, value: object, path: str) -> None:
        if isinstance(value, str):
            sources = find_expressions(value)
            for source in sources:
                self._compile(source, path)
            if value.count("{{") > len(sources):
                self.doc.error(path, 'has a "{{" without a closing "}}"')
        elif isinstance(value, dict):
            for key, item in value.items():
                self._check_expressions(item, _join(path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self._check_expressions(item, _index(path, i))

    def _compile(self, source: str, path: str) -> None:
        try:
            compile_expression(source)
        except ExpressionError as exc:
            self.doc.error(path, f'invalid expression "{exc.expression}": {exc.message}')

    def _required(self, mapping: dict, key: str, path: str) -> object:
        if key not in mapping:
            self.doc.missing(path, key)
            return None
        return mapping[key]

    def _string(self, mapping: dict, key: str, path: str, *, default: str) -> str:
        value = mapping.get(key, default)
        if not isinstance(value, str):
            self.doc.error(_join(path, key), "must be a string")
            return default
        return value

    def _boolean(self, mapping: dict, key: str, path: str) -> bool:
        value = mapping.get(key, False)
        if not isinstance(value, bool):
            self.doc.error(_join(path, key), "must be true or false")
            return False
        return value

    def _int(self, mapping: dict, key: str, path: str, *, minimum: int, default: int = 0) -> int:
        value = mapping.get(key, default)
        if not (_is_int(value) and value >= minimum):
            self.doc.error(_join(path, key), f"must be an integer >= {minimum}")
            return default
        return value

    def _duration(self, mapping: dict, key: str, path: str) -> float | None:
        if key not in mapping:
            return None
        try:
            seconds = parse_duration(mapping[key])
        except ValueError as exc:
            self.doc.error(_join(path, key), str(exc))
            return None
        if seconds <= 0:
            self.doc.error(_join(path, key), "must be a duration greater than zero")
        return seconds


def _reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    """Every step reachable from ``start`` through one or more edges."""
    found: set[str] = set()
    frontier = list(edges[start])
    while frontier:
        name = frontier.pop()
        if name not in found:
            found.add(name)
            frontier.extend(edges.get(name, ()))
    return found


def _shortest_cycle(start: str, dependencies: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest cycle through ``start`` in run order: ``[a, b, c, a]`` where b needs a."""
    dependents = {name: {d for d in group if name in dependencies[d]} for name in group}
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in previous:
        next_frontier = []
        for name in frontier:
            for dependent in sorted(dependents[name]):
                if dependent not in previous:
                    previous[dependent] = name
                    next_frontier.append(dependent)
        frontier = next_frontier
    cycle = [start]
    name = previous[start]
    while name != start:
        cycle.append(name)
        name = previous[name]
    cycle.append(start)
    return [cycle[0], *reversed(cycle[1:-1]), cycle[-1]]


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _index(parent: str, i: int) -> str:
    return f"{parent}[{i}]"
