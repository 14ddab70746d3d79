from __future__ import annotations

import pickle

import pytest

from workflows.expressions import (
    ExpressionError,
    compile_expression,
    evaluate,
    evaluate_condition,
    find_expressions,
    render,
    sole_expression,
)

CONTEXT = {
    "inputs": {"count": 3, "name": "ada", "tags": ["a", "b"], "ratio": 0.5},
    "steps": {"fetch": {"output": {"status": 200, "json": {"ids": [7, 8]}}}},
    "trigger": {"payload": {"ref": "main"}},
    "item": {"id": 7},
    "index": 1,
    "execution": {"id": "e-1"},
}


def test_it_finds_expressions_in_nested_values() -> None:
    value = {"a": "{{ inputs.x }}", "b": ["x {{ item }} y {{index}}", 3], "c": None}
    assert find_expressions(value) == ["inputs.x", "item", "index"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{ inputs.x }}", "inputs.x"),
        ("  {{inputs.x}}\n", "inputs.x"),
        ("id-{{ inputs.x }}", None),
        ("{{ a }}{{ b }}", None),
        ("plain", None),
    ],
)
def test_it_recognises_a_string_that_is_exactly_one_expression(
    text: str, expected: str | None
) -> None:
    assert sole_expression(text) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("inputs.count * 2", 6),
        ("inputs.count > 2", True),
        ("steps['fetch'].output.status", 200),
        ('steps["fetch"].output.json.ids[1]', 8),
        ("item.id + index", 8),
        ("trigger.payload.ref == 'main'", True),
        ("execution.id", "e-1"),
        ("size(inputs.tags)", 2),
        ("has(inputs.missing)", False),
        ("'count' in inputs", True),
        ("inputs.tags.map(t, t + '!')", ["a!", "b!"]),
    ],
)
def test_it_evaluates_to_native_python_values(source: str, expected: object) -> None:
    assert evaluate(source, CONTEXT) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("inputs.missing", "no such key 'missing'"),
        ("steps['nope'].output", "no such key 'nope'"),
        ("inputs.tags[5]", "index out of bounds"),
        ("inputs.ratio + 1", "float + int"),
        ("unknown_name", "Undefined variable"),
        ("inputs.count / 0", "division by zero"),
    ],
)
def test_it_reports_evaluation_failures_as_expression_errors(source: str, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        evaluate(source, CONTEXT)
    assert caught.value.expression == source
    assert message in caught.value.message
    assert str(caught.value).startswith(f'expression "{source}" failed: ')


@pytest.mark.parametrize("source", ["inputs.x +", "2 ** 3", "a b", "", "   "])
def test_it_rejects_expressions_that_do_not_parse(source: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(source)
    assert caught.value.expression == source.strip()
    assert "\n" not in caught.value.message


def test_it_says_where_a_parse_error_is() -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression("inputs.x +")
    assert str(caught.value).startswith(
        "expression \"inputs.x +\" failed: column 11: Syntax error: mismatched input '<EOF>'"
    )


def test_an_expression_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(ExpressionError(expression="a +", message="bad")))
    assert (error.expression, error.message, str(error)) == ("a +", "bad", str(error))
    assert str(error) == 'expression "a +" failed: bad'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{{ inputs.count }}", 3),
        ("  {{ inputs.tags }}  ", ["a", "b"]),
        ("{{ inputs.count > 1 }}", True),
        ("{{ item }}", {"id": 7}),
        ("n={{ inputs.count }}", "n=3"),
        ("{{ inputs.name }}-{{ index }}", "ada-1"),
        ("on={{ inputs.count > 1 }} off={{ inputs.count > 5 }}", "on=true off=false"),
        ("v={{ null }}", "v=null"),
        ("tags={{ inputs.tags }}", 'tags=["a","b"]'),
        ("item={{ item }}", 'item={"id":7}'),
        ("r={{ inputs.ratio }}", "r=0.5"),
        ("no expressions", "no expressions"),
        (42, 42),
        (None, None),
    ],
)
def test_it_renders_raw_values_or_interpolates(value: object, expected: object) -> None:
    assert render(value, CONTEXT) == expected


def test_it_renders_nested_params_and_leaves_keys_alone() -> None:
    params = {
        "url": "https://x/{{ item.id }}",
        "headers": {"{{ not_rendered }}": "{{ inputs.name }}"},
        "body": [{"ids": "{{ steps['fetch'].output.json.ids }}"}, True, 1.5],
    }
    assert render(params, CONTEXT) == {
        "url": "https://x/7",
        "headers": {"{{ not_rendered }}": "ada"},
        "body": [{"ids": [7, 8]}, True, 1.5],
    }


def test_rendering_a_missing_key_raises() -> None:
    with pytest.raises(ExpressionError, match="no such key 'nope'"):
        render({"a": ["x {{ inputs.nope }}"]}, CONTEXT)


@pytest.mark.parametrize(("source", "expected"), [("inputs.count > 1", True), ("false", False)])
def test_a_condition_yields_a_boolean(source: str, expected: bool) -> None:
    assert evaluate_condition(source, CONTEXT) is expected


@pytest.mark.parametrize(
    ("source", "type_name"), [("inputs.count", "int"), ("inputs.tags", "list"), ("null", "null")]
)
def test_a_condition_that_is_not_a_boolean_is_an_error(source: str, type_name: str) -> None:
    with pytest.raises(ExpressionError, match=f"if must yield a boolean, got {type_name}$"):
        evaluate_condition(source, CONTEXT)
