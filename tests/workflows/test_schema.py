from __future__ import annotations

import json
import pickle
import textwrap

import pytest

from core.durations import parse_duration
from tests.workflows.errors import schema_errors, schema_warnings
from workflows.actions import action_names
from workflows.schema import (
    InputSpec,
    InvalidInputs,
    RetrySpec,
    SchemaError,
    StepSpec,
    TriggerSpec,
    WorkflowInvalid,
    WorkflowSpec,
    parse_workflow,
    undeclared_given,
    validate_inputs,
)

FULL = """\
name: nightly-report
description: Builds the nightly report
inputs:
  count: {type: number, description: how many, default: 3}
  title: {type: string}
  dry_run: {type: boolean, default: false}
triggers:
  - type: webhook
    path: /hooks/report
    secret: s3cret
  - type: cron
    schedule: "0 3 * * *"
timeout: 5m
max_parallel_executions: 2
on_limit: reject
steps:
  - name: fetch
    action: http/request
    params:
      method: GET
      url: "https://example.test/{{ inputs.title }}"
      headers: {Accept: application/json}
      when: 2024-01-01
    retry: {max_attempts: 3, backoff: exponential}
    timeout: 500ms
  - name: fan
    action: test/echo
    depends_on: [fetch]
    if: "{{ steps['fetch'].output.status == 200 }}"
    for_each: "{{ steps['fetch'].output.json.ids }}"
    max_parallel: 4
    params: {id: "{{ item }}", n: "{{ index }}"}
  - name: done
    action: test/noop
    depends_on: [fan]
    if: inputs.count > 1
    continue_on_error: true
    for_each: [1, "{{ inputs.count }}"]
"""


def step_errors(step: str) -> list[tuple[int | None, str, str]]:
    """Errors of a workflow whose only step (at line 3) is `step`, indented as list content."""
    body = textwrap.indent(textwrap.dedent(step), "    ").replace("    ", "  - ", 1)
    return schema_errors("name: w\nsteps:\n" + body)


def test_it_parses_a_full_workflow() -> None:
    spec = parse_workflow(FULL)
    assert spec.name == "nightly-report"
    assert spec.description == "Builds the nightly report"
    assert spec.inputs == (
        InputSpec(name="count", type="number", description="how many", default=3, has_default=True),
        InputSpec(name="title", type="string"),
        InputSpec(name="dry_run", type="boolean", default=False, has_default=True),
    )
    assert spec.triggers == (
        TriggerSpec(type="webhook", path="/hooks/report", secret="s3cret"),
        TriggerSpec(type="cron", schedule="0 3 * * *"),
    )
    assert (spec.timeout, spec.max_parallel_executions, spec.on_limit) == (300.0, 2, "reject")
    fetch, fan, done = spec.steps
    assert fetch == StepSpec(
        name="fetch",
        action="http/request",
        params={
            "method": "GET",
            "url": "https://example.test/{{ inputs.title }}",
            "headers": {"Accept": "application/json"},
            "when": "2024-01-01",  # a YAML date stays text: the spec is stored as JSON
        },
        retry=RetrySpec(max_attempts=3, backoff="exponential"),
        timeout=0.5,
    )
    assert fan.depends_on == ("fetch",)
    assert fan.if_ == "steps['fetch'].output.status == 200"
    assert fan.for_each == "{{ steps['fetch'].output.json.ids }}"
    assert fan.max_parallel == 4
    assert done.if_ == "inputs.count > 1"
    assert done.continue_on_error is True
    assert done.for_each == [1, "{{ inputs.count }}"]
    assert done.retry == RetrySpec(max_attempts=1, backoff="fixed")


def test_it_applies_defaults_to_a_minimal_workflow() -> None:
    spec = parse_workflow("name: w\nsteps:\n  - {name: a, action: test/noop}\n")
    assert spec == WorkflowSpec(name="w", steps=(StepSpec(name="a", action="test/noop"),))
    assert (spec.max_parallel_executions, spec.on_limit, spec.timeout) == (0, "queue", None)


def test_a_workflow_round_trips_through_json() -> None:
    spec = parse_workflow(FULL)
    stored = json.loads(json.dumps(spec.to_dict()))
    assert stored == spec.to_dict()
    assert WorkflowSpec.from_dict(stored) == spec


def test_to_dict_does_not_share_mutable_params() -> None:
    spec = parse_workflow(FULL)
    spec.to_dict()["steps"][0]["params"]["method"] = "POST"
    assert spec.steps[0].params["method"] == "GET"


def test_it_reports_every_error_sorted_by_line() -> None:
    errors = schema_errors(
        """\
        on_limit: drop
        name: Bad_Name
        steps: []
        """
    )
    assert errors == [
        (1, "on_limit", "must be one of: queue, reject, cancel_running, keep_latest"),
        (2, "name", "must be kebab-case (^[a-z][a-z0-9-]*$)"),
        (3, "steps", "must be a non-empty list of steps"),
    ]


def test_schema_errors_read_with_line_and_path() -> None:
    error = SchemaError(
        path="steps[2].max_parallel", message="must be an integer from 0 to 2147483647", line=7
    )
    assert str(error) == "line 7: steps[2].max_parallel: must be an integer from 0 to 2147483647"
    assert str(SchemaError(path="", message="invalid YAML", line=None)) == "invalid YAML"


def test_workflow_invalid_survives_pickling() -> None:
    errors = [SchemaError(path="name", message="is required", line=1)]
    assert pickle.loads(pickle.dumps(WorkflowInvalid(errors))).errors == errors


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "name: w\nsteps: [\n",
            3,
            "invalid YAML: expected the node content, but found '<stream end>'",
        ),
        ("name: w\n  bad: indent\n", 2, "invalid YAML: mapping values are not allowed here"),
        ("- just\n- a list\n", 1, "must be a mapping"),
        ("", 1, "must be a mapping"),
    ],
)
def test_it_reports_bad_yaml_or_a_non_mapping_at_the_root(
    text: str, line: int, message: str
) -> None:
    assert schema_errors(text) == [(line, "", message)]


def test_it_rejects_duplicate_keys_at_any_depth() -> None:
    errors = schema_errors(
        """\
        name: w
        name: x
        steps:
          - name: a
            action: test/echo
            params: {a: 1, a: 2}
        """
    )
    assert errors == [
        (2, "name", 'duplicate key "name"'),
        (6, "steps[0].params.a", 'duplicate key "a"'),
    ]


def test_it_lets_a_key_override_a_merged_one() -> None:
    spec = parse_workflow(
        textwrap.dedent(
            """\
            name: w
            steps:
              - name: a
                action: test/echo
                params:
                  base: &base {x: 1, y: 2}
                  more: {<<: *base, y: 3}
            """
        )
    )
    assert spec.steps[0].params["more"] == {"x": 1, "y": 3}


def test_it_rejects_non_string_keys() -> None:
    assert step_errors("name: a\naction: test/echo\nparams: {200: ok}\n") == [
        (5, "steps[0].params", "keys must be strings (quote the key)")
    ]


def test_it_rejects_a_document_that_expands_without_bound() -> None:
    laughs = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("abcd", "bcde", strict=True)
    ]
    errors = schema_errors("\n".join(laughs) + "\n")
    expanded = [error for error in errors if error[2].startswith("the document expands")]
    assert [message for _, _, message in expanded] == [
        "the document expands to more than 100000 values"
    ]


def test_it_reports_missing_required_keys_at_their_mapping() -> None:
    assert schema_errors("description: x\n") == [
        (1, "name", "is required"),
        (1, "steps", "is required"),
    ]
    assert step_errors("params: {}\n") == [
        (3, "steps[0].name", "is required"),
        (3, "steps[0].action", "is required"),
    ]


@pytest.mark.parametrize("key", ["credential", "artifacts", "hooks", "token_budget"])
def test_it_rejects_upstream_only_keys_saying_so(key: str) -> None:
    message = f'"{key}" is not supported by Mantle (upstream-only key)'
    assert schema_errors(f"name: w\n{key}: x\nsteps:\n  - {{name: a, action: test/noop}}\n") == [
        (2, key, message)
    ]
    assert step_errors(f"name: a\naction: test/noop\n{key}: {{}}\n") == [
        (5, f"steps[0].{key}", message)
    ]


def test_it_rejects_unknown_keys() -> None:
    errors = schema_errors(
        """\
        name: w
        foo: 1
        inputs:
          x: {type: string, required: true}
        triggers:
          - {type: cron, schedule: "* * * * *", path: /hooks/x}
        steps:
          - name: a
            action: test/noop
            retry: {max_attempts: 2, delay: 1s}
            bar: 2
        """
    )
    assert errors == [
        (2, "foo", 'unknown key "foo"'),
        (4, "inputs.x.required", 'unknown key "required"'),
        (6, "triggers[0].path", 'unknown key "path"'),
        (10, "steps[0].retry.delay", 'unknown key "delay"'),
        (11, "steps[0].bar", 'unknown key "bar"'),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("Report", "must be kebab-case (^[a-z][a-z0-9-]*$)"),
        ("my_report", "must be kebab-case (^[a-z][a-z0-9-]*$)"),
        ("1report", "must be kebab-case (^[a-z][a-z0-9-]*$)"),
        ("[a]", "must be kebab-case (^[a-z][a-z0-9-]*$)"),
    ],
)
def test_it_requires_a_kebab_case_name(value: str, message: str) -> None:
    assert schema_errors(f"steps: [{{name: a, action: test/noop}}]\nname: {value}\n") == [
        (2, "name", message)
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("description: [x]", (2, "description", "must be a string")),
        (
            "timeout: 5x",
            (
                2,
                "timeout",
                "invalid duration '5x': "
                + "use seconds or a value like 500ms, 30s, 5m, 2h or 1h30m",
            ),
        ),
        ("timeout: 0s", (2, "timeout", "must be a duration greater than zero")),
        (
            "max_parallel_executions: -1",
            (2, "max_parallel_executions", "must be an integer from 0 to 2147483647"),
        ),
        (
            "max_parallel_executions: true",
            (2, "max_parallel_executions", "must be an integer from 0 to 2147483647"),
        ),
        (
            "max_parallel_executions: 1.5",
            (2, "max_parallel_executions", "must be an integer from 0 to 2147483647"),
        ),
        (
            "on_limit: drop",
            (2, "on_limit", "must be one of: queue, reject, cancel_running, keep_latest"),
        ),
        ("inputs: [x]", (2, "inputs", "must be a mapping of input name to definition")),
        ("triggers: {type: cron}", (2, "triggers", "must be a list")),
    ],
)
def test_it_checks_top_level_values(line: str, expected: tuple[int, str, str]) -> None:
    assert schema_errors(f"name: w\n{line}\nsteps: [{{name: a, action: test/noop}}]\n") == [
        expected
    ]


def test_it_checks_inputs() -> None:
    errors = schema_errors(
        """\
        name: w
        inputs:
          count: {type: number, default: "3"}
          flag: {type: boolean, default: 1}
          title: {type: string, default: 3}
          kind: {type: integer}
          bad-name: {type: string}
          untyped: {description: x}
          loose: text
        steps: [{name: a, action: test/noop}]
        """
    )
    assert errors == [
        (3, "inputs.count.default", "must be a number"),
        (4, "inputs.flag.default", "must be a boolean"),
        (5, "inputs.title.default", "must be a string"),
        (6, "inputs.kind.type", "must be one of: string, number, boolean"),
        (7, "inputs.bad-name", "must be an identifier (^[A-Za-z_][A-Za-z0-9_]*$)"),
        (9, "inputs.loose", "must be a mapping"),
    ]


def test_an_input_without_a_type_takes_any_json_value() -> None:
    spec = parse_workflow(
        "name: w\ninputs:\n  anything: {description: x}\n  bare:\n"
        "steps: [{name: a, action: test/echo, params: {x: '{{ inputs.anything }}'}}]\n"
    )
    assert [(item.name, item.type) for item in spec.inputs] == [("anything", None), ("bare", None)]
    given = {"anything": {"nested": [1, "two"]}, "bare": 3.5}
    assert validate_inputs(spec, given) == given


def test_it_checks_triggers() -> None:
    errors = schema_errors(
        """\
        name: w
        triggers:
          - {type: webhook, path: /nothooks/x}
          - {type: webhook, path: "/hooks/a b"}
          - {type: webhook, path: /hooks/ok/deeper, secret: ""}
          - {type: webhook, path: /hooks/ok/deeper}
          - {type: webhook}
          - {type: cron, schedule: "* * * *"}
          - {type: cron, schedule: "61 * * * *"}
          - {type: cron, schedule: "@daily"}
          - {type: email}
          - cron
        steps: [{name: a, action: test/noop}]
        """
    )
    path_message = 'must be a path like /hooks/<name> (letters, digits, "-", "_", ".", "~" and "/")'
    cron_message = 'must be a cron schedule of 5 fields, like "*/5 * * * *"'
    assert errors == [
        (3, "triggers[0].path", path_message),
        (4, "triggers[1].path", path_message),
        (5, "triggers[2].secret", "must be a non-empty string"),
        (6, "triggers[3].path", 'duplicate webhook path "/hooks/ok/deeper"'),
        (7, "triggers[4].path", "is required"),
        (8, "triggers[5].schedule", cron_message),
        (9, "triggers[6].schedule", cron_message),
        (10, "triggers[7].schedule", cron_message),
        (11, "triggers[8].type", "must be one of: webhook, cron"),
        (12, "triggers[9]", "must be a mapping"),
    ]


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("name: Fetch\naction: test/noop", (3, "steps[0].name", "must match ^[a-z][a-z0-9_-]*$")),
        (
            "name: a\naction: x/y",
            (
                4,
                "steps[0].action",
                'unknown action "x/y"; known: ' + ", ".join(sorted(action_names())),
            ),
        ),
        ("name: a\naction: test/noop\nparams: [1]", (5, "steps[0].params", "must be a mapping")),
        (
            "name: a\naction: test/noop\ndepends_on: b",
            (5, "steps[0].depends_on", "must be a list of step names"),
        ),
        (
            "name: a\naction: test/noop\ndepends_on: [a]",
            (5, "steps[0].depends_on[0]", "a step cannot depend on itself"),
        ),
        (
            "name: a\naction: test/noop\ndepends_on: [zz]",
            (5, "steps[0].depends_on[0]", 'unknown step "zz"'),
        ),
        (
            "name: a\naction: test/noop\nif: true",
            (5, "steps[0].if", "must be an expression string"),
        ),
        (
            "name: a\naction: test/noop\nif: '{{ a }} and {{ b }}'",
            (5, "steps[0].if", 'must be one expression, written with or without "{{ }}"'),
        ),
        ("name: a\naction: test/noop\nretry: 3", (5, "steps[0].retry", "must be a mapping")),
        (
            "name: a\naction: test/noop\nretry: {max_attempts: 0}",
            (5, "steps[0].retry.max_attempts", "must be an integer from 1 to 2147483647"),
        ),
        (
            "name: a\naction: test/noop\nretry: {max_attempts: true}",
            (5, "steps[0].retry.max_attempts", "must be an integer from 1 to 2147483647"),
        ),
        (
            "name: a\naction: test/noop\nretry: {backoff: linear}",
            (5, "steps[0].retry.backoff", "must be one of: fixed, exponential"),
        ),
        (
            "name: a\naction: test/noop\ntimeout: -1",
            (5, "steps[0].timeout", "invalid duration -1: must be a finite number >= 0"),
        ),
        (
            "name: a\naction: test/noop\ncontinue_on_error: 'yes'",
            (5, "steps[0].continue_on_error", "must be true or false"),
        ),
        (
            "name: a\naction: test/noop\nfor_each: inputs.items",
            (5, "steps[0].for_each", 'must be a list or one "{{ … }}" expression giving a list'),
        ),
        (
            "name: a\naction: test/noop\nfor_each: {a: 1}",
            (5, "steps[0].for_each", 'must be a list or one "{{ … }}" expression giving a list'),
        ),
        (
            "name: a\naction: test/noop\nfor_each: [1]\nmax_parallel: -1",
            (6, "steps[0].max_parallel", "must be an integer from 0 to 2147483647"),
        ),
        (
            "name: a\naction: test/noop\nfor_each: [1]\nmax_parallel: false",
            (6, "steps[0].max_parallel", "must be an integer from 0 to 2147483647"),
        ),
        ("- name: a", (3, "steps[0]", "must be a mapping")),
    ],
)
def test_it_checks_step_fields(step: str, expected: tuple[int, str, str]) -> None:
    assert step_errors(step + "\n") == [expected]


def test_it_accepts_known_actions_passed_in() -> None:
    text = "name: w\nsteps: [{name: a, action: slack/post}]\n"
    assert parse_workflow(text, actions=frozenset({"slack/post"})).steps[0].action == "slack/post"
    assert schema_errors(text, actions=frozenset({"test/noop"})) == [
        (2, "steps[0].action", 'unknown action "slack/post"; known: test/noop')
    ]


def test_it_reports_duplicate_step_names() -> None:
    errors = schema_errors(
        """\
        name: w
        steps:
          - {name: a, action: test/noop}
          - {name: a, action: test/noop}
        """
    )
    assert errors == [(4, "steps[1].name", 'duplicate step name "a" (first defined on line 3)')]


def test_it_reports_a_cycle_with_its_members() -> None:
    errors = schema_errors(
        """\
        name: w
        steps:
          - {name: start, action: test/noop}
          - {name: a, action: test/noop, depends_on: [start, c]}
          - {name: b, action: test/noop, depends_on: [a]}
          - {name: c, action: test/noop, depends_on: [b]}
          - {name: x, action: test/noop, depends_on: [y]}
          - {name: y, action: test/noop, depends_on: [x]}
        """
    )
    assert errors == [
        (4, "steps[1].depends_on", "cycle: a -> b -> c -> a"),
        (7, "steps[4].depends_on", "cycle: x -> y -> x"),
    ]


def test_it_reports_one_error_for_tangled_cycles() -> None:
    errors = schema_errors(
        """\
        name: w
        steps:
          - {name: a, action: test/noop, depends_on: [c, b]}
          - {name: b, action: test/noop, depends_on: [a]}
          - {name: c, action: test/noop, depends_on: [b]}
        """
    )
    assert errors == [(3, "steps[0].depends_on", "cycle: a -> b -> a")]


def test_it_reports_expressions_that_do_not_compile_at_their_path() -> None:
    errors = schema_errors(
        """\
        name: w
        steps:
          - name: a
            action: test/echo
            params:
              ok: "{{ execution.id }}"
              nested: {list: [1, "x {{ inputs.x + }}"]}
              open: "{{ inputs.x"
            if: "{{ 2 ** 3 }}"
            for_each: "{{ [1, }}"
          - name: b
            action: test/echo
            for_each: ["{{ a b }}"]
        """
    )
    assert [(line, path) for line, path, _ in errors] == [
        (7, "steps[0].params.nested.list[1]"),
        (8, "steps[0].params.open"),
        (9, "steps[0].if"),
        (10, "steps[0].for_each"),
        (13, "steps[1].for_each[0]"),
    ]
    assert errors[0][2].startswith('invalid expression "inputs.x +": column 11: Syntax error')
    assert errors[1][2] == 'has a "{{" without a closing "}}"'


@pytest.mark.parametrize(
    "written", ["inputs.x > 1", "'{{ inputs.x > 1 }}'", "'  {{inputs.x > 1}} '"]
)
def test_it_accepts_if_with_or_without_braces(written: str) -> None:
    spec = parse_workflow(
        "name: w\ninputs: {x: {type: number}}\n"
        f"steps:\n  - {{name: a, action: test/noop, if: {written}}}\n"
    )
    assert spec.steps[0].if_ == "inputs.x > 1"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        (" 10 ", 10.0),
        ("0", 0.0),
        (45, 45.0),
        (0.25, 0.25),
    ],
)
def test_it_parses_durations(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "value", ["", "5x", "5 m", "m", "-1s", "-3", "1e3", "inf", True, float("nan")]
)
def test_it_rejects_bad_durations(value: object) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(value)  # type: ignore[arg-type]


@pytest.fixture
def spec() -> WorkflowSpec:
    return parse_workflow(FULL)


def test_it_applies_input_defaults(spec: WorkflowSpec) -> None:
    assert validate_inputs(spec, {"title": "t"}) == {"count": 3, "title": "t", "dry_run": False}
    assert validate_inputs(spec, {"title": "t", "count": 2.5, "dry_run": True}) == {
        "count": 2.5,
        "title": "t",
        "dry_run": True,
    }


@pytest.mark.parametrize(
    ("given", "errors"),
    [
        (None, ["inputs.title: is required"]),
        ({}, ["inputs.title: is required"]),
        ({"title": 1}, ["inputs.title: must be a string"]),
        ({"title": "t", "count": True}, ["inputs.count: must be a number"]),
        ({"title": "t", "count": "3"}, ["inputs.count: must be a number"]),
        ({"title": "t", "count": float("nan")}, ["inputs.count: must be a number"]),
        ({"title": "t", "dry_run": 1}, ["inputs.dry_run: must be a boolean"]),
        ([1], ["inputs: must be an object"]),
        (
            {"extra": 1, "count": "x"},
            ["inputs.count: must be a number", "inputs.title: is required"],
        ),
    ],
)
def test_it_rejects_bad_inputs(spec: WorkflowSpec, given: object, errors: list[str]) -> None:
    with pytest.raises(InvalidInputs) as caught:
        validate_inputs(spec, given)  # type: ignore[arg-type]
    assert caught.value.errors == errors


def test_an_undeclared_input_is_kept_as_given_with_a_warning(spec: WorkflowSpec) -> None:
    given = {"title": "t", "extra": {"any": ["json"]}}
    assert validate_inputs(spec, given) == {**given, "count": 3, "dry_run": False}
    assert undeclared_given(spec, given) == [
        "inputs.extra: undeclared input (accepted: inputs are an open map)"
    ]
    assert undeclared_given(spec, {"title": "t"}) == []


MAX_PARALLEL_IGNORED = "is ignored: it bounds the branches of a for_each, and this step has none"
MAX_PARALLEL_WITHOUT_FOR_EACH = """\
    name: w
    steps:
      - name: a
        action: test/noop
        max_parallel: 2
    """


def test_max_parallel_without_for_each_is_ignored_with_a_warning() -> None:
    assert parse_workflow(textwrap.dedent(MAX_PARALLEL_WITHOUT_FOR_EACH)).steps[0].max_parallel == 0
    assert schema_warnings(MAX_PARALLEL_WITHOUT_FOR_EACH) == [
        (5, "steps[0].max_parallel", MAX_PARALLEL_IGNORED)
    ]


def test_strict_makes_every_warning_an_error() -> None:
    assert schema_errors(MAX_PARALLEL_WITHOUT_FOR_EACH, strict=True) == [
        (5, "steps[0].max_parallel", MAX_PARALLEL_IGNORED)
    ]
