"""The flow-control keys of a workflow document (workflows/schema/flow_control.py): apply-time
errors with path and line."""

from __future__ import annotations

import pytest

from tests.factories import workflow_yaml
from workflows.schema import WorkflowInvalid, parse_workflow, validate_workflow

KEYED = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'


def errors(text: str) -> list[str]:
    with pytest.raises(WorkflowInvalid) as caught:
        parse_workflow(text)
    return [str(error) for error in caught.value.errors]


def test_it_reads_a_key_and_its_limit() -> None:
    spec = parse_workflow(workflow_yaml(extra=KEYED + "max_parallel_per_key: 2\n"))
    assert spec.concurrency_key == "{{ inputs.customer }}"
    assert spec.max_parallel_per_key == 2


def test_a_workflow_without_flow_control_keeps_the_defaults() -> None:
    spec = parse_workflow(workflow_yaml())
    assert (spec.concurrency_key, spec.max_parallel_per_key, spec.on_limit) == (None, 0, "queue")


def test_a_key_may_read_the_trigger_and_interpolate() -> None:
    spec = parse_workflow(
        workflow_yaml(extra='concurrency_key: "repo-{{ trigger.payload.repo }}"\n')
    )
    assert spec.concurrency_key == "repo-{{ trigger.payload.repo }}"


def test_a_key_reading_anything_else_is_an_error_with_its_line() -> None:
    text = workflow_yaml(extra='concurrency_key: "{{ steps.only.output }}"\n')
    assert errors(text) == [
        'line 4: concurrency_key: expression "steps.only.output": "steps" is not in scope here'
        " (only inputs and trigger)"
    ]


def test_a_key_reading_an_undeclared_input_is_a_warning() -> None:
    text = workflow_yaml(extra='concurrency_key: "{{ inputs.nope }}"\n')
    assert [str(w) for w in validate_workflow(text).warnings] == [
        'line 4: concurrency_key: expression "inputs.nope": undeclared input "nope" '
        "(accepted: inputs are an open map; declare it in inputs)"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"{{ inputs.customer + }}"', "invalid expression"),
        ('"{{ nosuch(inputs.customer) }}"', 'unknown function "nosuch"'),
        ("7", "must be a non-empty string"),
        ('""', "must be a non-empty string"),
        ('"{{ inputs.customer"', 'without a closing "}}"'),
    ],
)
def test_bad_keys_are_errors_at_their_path(value: str, message: str) -> None:
    text = workflow_yaml(extra=f"inputs:\n  customer: {{type: string}}\nconcurrency_key: {value}\n")
    (error,) = errors(text)
    assert error.startswith("line 6: concurrency_key: ")
    assert message in error


def test_a_per_key_limit_needs_a_key() -> None:
    assert errors(workflow_yaml(extra="max_parallel_per_key: 2\n")) == [
        "line 4: max_parallel_per_key: is only valid together with concurrency_key"
    ]


def test_a_per_key_limit_is_a_non_negative_integer() -> None:
    assert errors(workflow_yaml(extra=KEYED + "max_parallel_per_key: -1\n")) == [
        "line 7: max_parallel_per_key: must be an integer from 0 to 2147483647"
    ]


def test_a_priority_is_an_integer_or_an_expression() -> None:
    assert parse_workflow(workflow_yaml(extra="priority: 7\n")).priority == 7
    spec = parse_workflow(workflow_yaml(extra=KEYED.replace("concurrency_key", "priority")))
    assert spec.priority == "{{ inputs.customer }}"


@pytest.mark.parametrize("value", ["10", "-1", "true", "'5'", '"{{ env.X }}"', '"p{{ 1 }}"'])
def test_bad_priorities_are_errors_at_their_path(value: str) -> None:
    (error,) = errors(workflow_yaml(extra=f"priority: {value}\n"))
    assert error.startswith("line 4: priority: ")


def test_bounds_are_read_with_the_timeout_as_written() -> None:
    spec = parse_workflow(workflow_yaml(extra="max_queued: 5\nqueue_timeout: 1h30m\n"))
    assert (spec.max_queued, spec.queue_timeout, spec.queue_timeout_text) == (5, 5400.0, "1h30m")
    assert parse_workflow(workflow_yaml(extra="queue_timeout: 90\n")).queue_timeout_text == "90s"


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ("max_queued: -1\n", "max_queued"),
        ("queue_timeout: soon\n", "queue_timeout"),
        ("queue_timeout: 0s\n", "queue_timeout"),
    ],
)
def test_bad_bounds_are_errors_at_their_path(extra: str, path: str) -> None:
    (error,) = errors(workflow_yaml(extra=extra))
    assert error.startswith(f"line 4: {path}: ")
