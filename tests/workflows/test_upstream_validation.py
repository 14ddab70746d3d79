"""Upstream-style expressions are checked when a workflow is applied: what they read and call,
reported at the path and line of the expression (docs/workflows.md)."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from core.durations import parse_duration
from tests.workflows.errors import schema_errors, schema_warnings
from workflows.schema import parse_workflow


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("steps['nope'].output", 'unknown step "nope"'),
        ("steps.nope.output", 'unknown step "nope"'),
        (
            "nosuch.field",
            'undeclared variable "nosuch" (in scope: env, execution, inputs, steps, trigger)',
        ),
        ("shout('x')", 'unknown function "shout"'),
        ("parseInt('1', 10)", "parseInt() takes 1 argument, got 2"),
        ("obj('a')", "obj() takes 2 or 4 or 6 or 8 or 10 arguments, got 1"),
        ("'x'.replace('a')", "replace() takes 2 arguments, got 1"),
        ("toLower('X')", '"toLower" is called on a value: x.toLower(…)'),
        ("'x'.parseInt()", '"parseInt" is not a method: call it as parseInt(…)'),
        ("item", '"item" is only in scope in the params of a for_each step'),
        ("index + 1", '"index" is only in scope in the params of a for_each step'),
        (
            "steps[inputs.name].output",
            "read a step by its name, as steps['name'] or steps.name "
            "(the steps an expression reads are its dependencies)",
        ),
    ],
)
def test_it_reports_what_an_expression_may_not_read_or_call_at_its_path_and_line(
    expression: str, problem: str
) -> None:
    found = schema_errors(
        f"""\
        name: w
        inputs:
          name: {{type: string}}
        steps:
          - name: first
            action: test/noop
          - name: second
            action: test/echo
            params:
              value: "{{{{ {expression} }}}}"
        """
    )
    assert found == [(10, "steps[1].params.value", f'expression "{expression}": {problem}')]


def test_an_undeclared_input_or_unset_env_is_a_warning_at_its_path_and_line(settings) -> None:
    settings.MANTLE = replace(settings.MANTLE, env={"REGION": "eu"})
    found = schema_warnings(
        """\
        name: w
        steps:
          - name: first
            action: test/echo
            params:
              who: "{{ inputs.customer }}"
              where: "{{ env.REGION }}-{{ env.NOT_SET }}"
        """
    )
    assert found == [
        (
            6,
            "steps[0].params.who",
            'expression "inputs.customer": undeclared input "customer" (accepted: inputs are an '
            "open map; declare it in inputs)",
        ),
        (
            7,
            "steps[0].params.where",
            'expression "env.NOT_SET": env "NOT_SET" is not set in this configuration '
            "(env: in mantle.yaml); a run that reads it fails",
        ),
    ]


ONLY_IN_FOR_EACH = "is only in scope in the params of a for_each step"


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(
            """\
            name: w
            steps:
              - name: fan
                action: test/echo
                for_each: "{{ [item] }}"
                if: "{{ index > 0 }}"
                params: {value: "{{ item }}", at: "{{ index }}"}
            """,
            [
                (5, "steps[0].for_each", f'expression "[item]": "item" {ONLY_IN_FOR_EACH}'),
                (6, "steps[0].if", f'expression "index > 0": "index" {ONLY_IN_FOR_EACH}'),
            ],
            id="item and index in the params of a for_each step only",
        ),
        pytest.param(
            """\
            name: w
            steps:
              - name: a
                action: test/echo
                params: {x: "{{ steps.c.output }}"}
              - name: b
                action: test/echo
                params: {x: "{{ steps['a'].output }}"}
              - name: c
                action: test/noop
                depends_on: [b]
            """,
            [(3, "steps[0]", "cycle: a -> b -> c -> a")],
            id="a cycle through references is named like one through depends_on",
        ),
        pytest.param(
            """\
            name: w
            steps:
              - name: a
                action: test/echo
                params: {x: "{{ steps.a.output }}"}
            """,
            [
                (
                    5,
                    "steps[0].params.x",
                    'expression "steps.a.output": step "a" cannot read its own result',
                )
            ],
            id="a step cannot read itself",
        ),
    ],
)
def test_what_references_may_not_do_is_reported_at_its_path_and_line(
    document: str, expected: list[tuple[int, str, str]]
) -> None:
    assert schema_errors(document) == expected


def test_references_become_dependencies_after_depends_on_in_file_order() -> None:
    spec = parse_workflow(
        textwrap.dedent(
            """\
            name: w
            steps:
              - {name: a, action: test/noop}
              - {name: b, action: test/noop}
              - {name: c, action: test/noop}
              - name: d
                action: test/echo
                depends_on: [c]
                if: "has(steps.b.output)"
                for_each: "{{ [steps.a.output] }}"
                params: {x: "{{ default(steps['c'].output, item) }}"}
            """
        )
    )
    assert spec.steps[3].depends_on == ("c", "a", "b")
    assert [step.depends_on for step in spec.steps[:3]] == [(), (), ()]


def test_upstream_spellings_are_accepted() -> None:
    spec = parse_workflow(
        textwrap.dedent(
            """\
            name: w
            on_limit: ""
            timeout: 1h30m
            inputs:
              anything:
            steps:
              - {name: a, action: test/echo, timeout: 300ms, params: {v: "{{ inputs.anything }}"}}
              - {name: b, action: test/sleep, timeout: 2.5s, params: {seconds: 0}}
            """
        )
    )
    assert (spec.on_limit, spec.timeout) == ("queue", 5400.0)
    assert [step.timeout for step in spec.steps] == [0.3, 2.5]
    assert spec.inputs[0].type is None


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("300ms", 0.3),
        ("1h30m", 5400.0),
        ("2.5s", 2.5),
        ("100us", 0.0001),
        ("1.5µs", 1.5e-6),
        ("3μs", 3e-6),
        ("10ns", 1e-8),
        (".5h", 1800.0),
        ("1h0m0.5s", 3600.5),
    ],
)
def test_durations_take_gos_units_and_forms(written: str, seconds: float) -> None:
    assert parse_duration(written) == seconds
