"""The validation errors and warnings of a workflow document, as (line, path, message) tuples."""

from __future__ import annotations

import textwrap

import pytest

from workflows.schema import WorkflowInvalid, validate_workflow


def schema_errors(
    text: str, *, actions: frozenset[str] | None = None, strict: bool = False
) -> list[tuple[int | None, str, str]]:
    """The errors of `text` (dedented), which must be invalid."""
    with pytest.raises(WorkflowInvalid) as caught:
        validate_workflow(textwrap.dedent(text), actions=actions, strict=strict)
    return [(error.line, error.path, error.message) for error in caught.value.errors]


def schema_warnings(text: str) -> list[tuple[int | None, str, str]]:
    """The warnings of `text` (dedented), which must be valid."""
    warnings = validate_workflow(textwrap.dedent(text)).warnings
    return [(warning.line, warning.path, warning.message) for warning in warnings]
