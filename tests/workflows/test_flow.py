"""A concurrency key evaluated from a run's inputs and trigger (workflows/admission_values.py)."""

from __future__ import annotations

import pytest

from tests.factories import workflow_yaml
from workflows.admission_values import MAX_KEY_LENGTH, concurrency_key_value
from workflows.schema import InvalidInputs, parse_workflow


def key(template: str, inputs: dict, trigger: dict | None = None) -> str:
    spec = parse_workflow(
        workflow_yaml(extra=f"inputs:\n  customer:\nconcurrency_key: {template!r}\n")
    )
    return concurrency_key_value(spec, inputs=inputs, trigger=trigger or {})


def test_an_unkeyed_workflow_has_the_empty_key() -> None:
    spec = parse_workflow(workflow_yaml())
    assert concurrency_key_value(spec, inputs={}, trigger={}) == ""


def test_the_key_is_the_expression_value() -> None:
    assert key("{{ inputs.customer }}", {"customer": "acme"}) == "acme"
    assert key("c-{{ inputs.customer }}", {"customer": 7}) == "c-7"
    assert key("{{ trigger.payload.repo }}", {}, {"payload": {"repo": "r"}}) == "r"


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({}, "concurrency_key: expression"),
        ({"customer": 7}, "must give a non-empty string, got int"),
        ({"customer": ""}, "must give a non-empty string, got ''"),
        ({"customer": "x" * (MAX_KEY_LENGTH + 1)}, "201 characters, over the limit of 200"),
    ],
)
def test_a_key_that_cannot_be_evaluated_is_an_input_error(inputs: dict, message: str) -> None:
    with pytest.raises(InvalidInputs) as caught:
        key("{{ inputs.customer }}", inputs)
    assert message in str(caught.value)
