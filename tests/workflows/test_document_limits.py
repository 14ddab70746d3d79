"""Document limits: deep nesting, unstorable characters, tags that would be dropped, and too
many steps are validation errors with a line — never a RecursionError, a 500, or silence."""

from __future__ import annotations

import pytest

from tests.workflows.errors import schema_errors
from workflows.schema import parse_workflow

HEAD = "name: w\nsteps:\n  - name: a\n    action: test/echo\n"


DEEP = "nested more than 32 levels deep (limits.document_depth)"


@pytest.mark.parametrize(
    "params",
    [
        "{x: " + "[" * 2000 + "]" * 2000 + "}",  # flow style: PyYAML's RecursionError at ~500
        "\n" + "".join("      " + "  " * i + "- \n" for i in range(40)),  # block style
    ],
    ids=["flow", "block"],
)
def test_nesting_past_the_limit_is_refused_before_composing(params) -> None:
    [(line, path, message)] = schema_errors(HEAD + f"    params: {params}\n")
    assert (path, message) == ("", DEEP)
    assert line is not None and line >= 5


def test_aliases_cannot_nest_past_the_limit_either() -> None:
    """Each line nests one level, so the text's own nesting stays shallow."""
    anchors = "".join(f"  - &a{i} [*a{i - 1}]\n" for i in range(1, 40))
    text = (
        f"name: w\nanchors:\n  - &a0 [1]\n{anchors}steps:\n  - name: a\n    action: test/echo\n"
        "    params: {deep: *a39}\n"
    )
    assert any(message == DEEP for _line, _path, message in schema_errors(text))


@pytest.mark.parametrize(
    ("yaml_value", "where"),
    [('{x: "\\ud800"}', "steps[0].params.x"), ('{"\\udfff": 1}', "steps[0].params")],
    ids=["value", "key"],
)
def test_a_lone_surrogate_is_an_error_with_its_line(yaml_value, where) -> None:
    [(line, path, message)] = schema_errors(HEAD + f"    params: {yaml_value}\n")
    assert (line, path) == (5, where)
    assert "lone surrogate" in message


@pytest.mark.parametrize("tagged", ["!!set {a: null}", "!custom [1, 2]", "!!omap [a: 1]"])
def test_a_tag_on_a_sequence_or_mapping_is_an_error_not_dropped(tagged) -> None:
    [(line, path, message)] = schema_errors(HEAD + f"    params: {{x: {tagged}}}\n")
    assert (line, path) == (5, "steps[0].params.x")
    assert message.startswith("the tag ") and message.endswith(" is not supported: remove it")


def test_steps_past_the_limit_are_one_error() -> None:
    steps = "".join(f"  - {{name: s{i}, action: test/noop}}\n" for i in range(1001))
    assert schema_errors(f"name: w\nsteps:\n{steps}") == [
        (3, "steps", "1001 steps, over limits.workflow_steps (1000)")
    ]
    assert len(parse_workflow(f"name: w\nsteps:\n{steps[: steps.rindex('  - ')]}").steps) == 1000
