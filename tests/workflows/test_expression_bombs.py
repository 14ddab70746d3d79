"""The cost bound counts what an expression builds, not only its inputs (docs/hostile-input.md,
Expressions): literal lists and maps, nested comprehensions over them, concatenations and string
growth are refused when the workflow is applied or before evaluation, and admission's
expressions run under a tighter budget."""

from __future__ import annotations

import time

import pytest

from executions.models import Execution
from executions.services.admission import execution_admit
from workflows.expressions import ExpressionError, compile_expression, evaluate
from workflows.expressions.limits import admission_budget, expression_shape
from workflows.schema import InvalidInputs, WorkflowInvalid
from workflows.services import workflow_apply

LIST_101 = "[" + ", ".join(str(i) for i in range(101)) + "]"
LIST_80 = "[" + ", ".join(str(i) for i in range(80)) + "]"
# About 100 M steps without any input (the bomb): 12 s of a worker before.
BOMB = f"size([{LIST_101}].map(l, l.map(a, l.map(b, l.map(c, 1)))))"


def test_literal_lists_and_maps_are_measured() -> None:
    shape = expression_shape(BOMB)
    assert (shape.literal_items, shape.comprehension_depth) == (101, 4)
    assert expression_shape("{'a': 1, 'b': 2, 'c': [1, 2]}").literal_items == 3
    assert expression_shape("inputs.a[0] + x[1]").literal_items == 0  # indexing is no literal
    assert expression_shape("[]").literal_items == 0


@pytest.mark.parametrize(
    "source",
    [
        BOMB,
        f"[{LIST_101}].map(l, l.map(a, l.map(b, l.map(c, 1)))).size()",
        f"{LIST_101}.all(a, {LIST_101}.all(b, {LIST_101}.all(c, true)))",
        "{"
        + ", ".join(f"'{i}': {i}" for i in range(101))
        + "}.map(k, "
        + LIST_101
        + ".map(a, "
        + LIST_101
        + ".map(b, 1)))",
        # Concatenated, a list is longer than any of its parts: 400^3 steps.
        "(" + " + ".join([LIST_80] * 5) + ").map(a, (" + " + ".join([LIST_80] * 5) + ").map(b, 1))",
    ],
)
def test_a_literal_bomb_is_refused_at_compile_time_in_no_time(source: str) -> None:
    started = time.monotonic()
    with pytest.raises(ExpressionError, match=r"over limits\.expression_cost"):
        compile_expression(source)
    with pytest.raises(ExpressionError, match=r"over limits\.expression_cost"):
        evaluate(source, {})
    assert time.monotonic() - started < 1  # refused, not run (it ran 12 s before)


def test_a_small_literal_comprehension_still_runs() -> None:
    assert evaluate("[1, 2, 3].map(x, [1, 2].map(y, x * y))", {}) == [[1, 2], [2, 4], [3, 6]]
    compile_expression("inputs.items.map(x, x.id + '-' + x.name)")


def test_the_bomb_is_refused_when_its_workflow_is_applied(team) -> None:
    content = (
        "name: bomb\nsteps:\n  - name: a\n    action: test/echo\n"
        f'    params: {{n: "{{{{ {BOMB} }}}}"}}\n'
    )
    with pytest.raises(WorkflowInvalid) as raised:
        workflow_apply(team=team, content=content)
    assert raised.value.errors[0].path == "steps[0].params.n"
    assert "over limits.expression_cost" in raised.value.errors[0].message


def test_admission_expressions_have_the_tighter_budget(team) -> None:
    # 80 items, 2 levels: 512,000 steps, within a step's budget, not within admission's.
    key = f"size({LIST_80}.map(a, {LIST_80}.map(b, 1))) > 0 ? 'k' : 'j'"
    evaluate(key, {})
    with admission_budget(), pytest.raises(ExpressionError, match="admission_expression_cost"):
        evaluate(key, {})
    content = (
        f'name: keyed\nconcurrency_key: "{{{{ {key} }}}}"\n'
        "steps:\n  - name: a\n    action: test/noop\n"
    )
    with pytest.raises(WorkflowInvalid) as raised:
        workflow_apply(team=team, content=content)
    assert raised.value.errors[0].path == "concurrency_key"
    assert "limits.admission_expression_cost (100000)" in raised.value.errors[0].message


def test_an_input_driven_admission_bomb_is_400_before_anything_is_written(team) -> None:
    content = (
        "name: keyed\ninputs:\n  xs: {}\n"
        'concurrency_key: "{{ string(size(inputs.xs.map(a, inputs.xs.map(b, 1)))) }}"\n'
        "steps:\n  - name: a\n    action: test/noop\n"
    )
    workflow = workflow_apply(team=team, content=content).workflow
    with pytest.raises(InvalidInputs, match="admission_expression_cost"):
        execution_admit(team=team, workflow=workflow, inputs={"xs": list(range(80))})
    assert not Execution.objects.exists()
    admitted = execution_admit(team=team, workflow=workflow, inputs={"xs": list(range(10))})
    assert admitted.execution.concurrency_key == "10"


def test_string_growth_through_replace_is_bounded() -> None:
    source = "'aaaaaaaaaa'" + ".replace('a', 'aaaaaaaaaa')" * 8
    with pytest.raises(ExpressionError, match=r"replace: the result would be 10000000 characters"):
        evaluate(source, {})
    assert evaluate("'ab'.replace('a', 'xy')", {}) == "xyb"
