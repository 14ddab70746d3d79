"""Inputs: the declared types, their declaration in a workflow document, and the run-time check
of the inputs given to a run."""

from __future__ import annotations

import copy
import math
import re
from typing import cast

from workflows.schema.document import Document, join
from workflows.schema.spec import InputSpec, WorkflowSpec
from workflows.schema.triggers import KeyCheck


def _is_string(value: object) -> bool:
    return isinstance(value, str)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_boolean(value: object) -> bool:
    return isinstance(value, bool)


def _is_any(value: object) -> bool:
    return True


# input type → (check, what the error says it must be)
INPUT_TYPES = {
    "string": (_is_string, "a string"),
    "number": (_is_number, "a number"),
    "boolean": (_is_boolean, "a boolean"),
}


_INPUT_KEYS = frozenset({"type", "description", "default"})
_INPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def inputs_read(doc: Document, value: object, check_keys: KeyCheck) -> tuple[InputSpec, ...]:
    """The inputs a workflow declares; their errors go to ``doc``."""
    if not isinstance(value, dict):
        doc.error("inputs", "must be a mapping of input name to definition")
        return ()
    specs = []
    for name, definition in value.items():
        path = join("inputs", name)
        if not _INPUT_NAME.fullmatch(name):
            doc.error(path, "must be an identifier (^[A-Za-z_][A-Za-z0-9_]*$)", at_key=True)
        if definition is None:  # `name:` alone declares an untyped input
            definition = {}
        if not isinstance(definition, dict):
            doc.error(path, "must be a mapping")
            continue
        check_keys(definition, path, _INPUT_KEYS)
        input_type = definition.get("type")
        if input_type is not None and not (
            isinstance(input_type, str) and input_type in INPUT_TYPES
        ):
            doc.error(join(path, "type"), "must be one of: string, number, boolean")
            input_type = None
        has_default = "default" in definition
        if has_default and input_type is not None:
            check, expected = INPUT_TYPES[input_type]
            if not check(definition["default"]):
                doc.error(join(path, "default"), f"must be {expected}")
        specs.append(
            InputSpec(
                name=name,
                type=cast(str, input_type),
                description=_description(doc, definition, path),
                default=definition.get("default"),
                has_default=has_default,
            )
        )
    return tuple(specs)


def _description(doc: Document, definition: dict, path: str) -> str:
    description = definition.get("description", "")
    if not isinstance(description, str):
        doc.error(join(path, "description"), "must be a string")
        return ""
    return description


class InvalidInputs(Exception):
    """Inputs given to a run do not match the workflow's declared inputs."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))

    def __reduce__(self) -> tuple[object, tuple[list[str]]]:
        return type(self), (self.errors,)


def undeclared_given(spec: WorkflowSpec, given: dict) -> list[str]:
    """A warning for each input given that the workflow does not declare (docs/workflows.md,
    Warnings)."""
    declared = {item.name for item in spec.inputs}
    return [
        f"inputs.{name}: undeclared input (accepted: inputs are an open map)"
        for name in given
        if name not in declared
    ]


def validate_inputs(spec: WorkflowSpec, given: dict | None) -> dict:
    """The run's inputs with defaults applied, or InvalidInputs naming every bad input. An
    undeclared input is kept as given: upstream's inputs are an open map."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise InvalidInputs(["inputs: must be an object"])
    declared = {item.name for item in spec.inputs}
    errors = []
    result: dict[str, object] = {k: v for k, v in given.items() if k not in declared}
    for item in spec.inputs:
        if item.name in given:
            check, expected = INPUT_TYPES[item.type] if item.type else (_is_any, "")
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
