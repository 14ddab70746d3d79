"""The validation errors of a workflow document, as (line, path, message) tuples."""

from __future__ import annotations

import textwrap

import pytest

from workflows.schema import WorkflowInvalid, parse_workflow


def schema_errors(
    text: str, *, actions: frozenset[str] | None = None
) -> list[tuple[int | None, str, str]]:
    """The errors of `text` (dedented), which must be invalid."""
    with pytest.raises(WorkflowInvalid) as caught:
        parse_workflow(textwrap.dedent(text), actions=actions)
    return [(error.line, error.path, error.message) for error in caught.value.errors]
