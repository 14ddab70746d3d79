"""Expression limits: what would crash the CEL library (SIGSEGV near 50,000 chained operators)
is refused before it compiles, and an evaluation's cost is bounded before it runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import CONFIG
from workflows.expressions import ExpressionError, compile_expression, evaluate
from workflows.expressions.limits import expression_shape

CHAINS = {
    "plus": "1" + "+1" * 50_000,
    "times": "1" + "*1" * 50_000,
    "equals": "1" + "==1" * 50_000,
    "members": "a" + ".a" * 50_000,
}


def validate(path: Path, **limits: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **CONFIG}
    env.update({f"MANTLE_LIMITS_{name.upper()}": str(value) for name, value in limits.items()})
    return subprocess.run(
        [str(Path(sys.executable).with_name("mantle")), "validate", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def bomb(chains: list[str]) -> str:
    steps = "".join(
        f'  - name: s{n}\n    action: test/echo\n    params: {{x: "{{{{ {chain} }}}}"}}\n'
        for n, chain in enumerate(chains)
    )
    return f"name: bomb\nsteps:\n{steps}"


def test_chains_that_crash_the_library_are_refused_by_each_limit(tmp_path) -> None:
    """Each limit alone refuses them (the others raised out of the way): were the library to
    see one, `mantle validate` would die of SIGSEGV (exit -11) instead of exiting 1."""
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(list(CHAINS.values())))
    huge = 10**9
    for limits, named in [
        ({}, "limits.expression_length"),
        ({"expression_length": huge}, "limits.expression_nodes"),
        ({"expression_length": huge, "expression_nodes": huge}, "limits.expression_depth"),
    ]:
        done = validate(path, **limits)
        assert done.returncode == 1, done.stderr
        lines = [line for line in done.stderr.splitlines() if named in line]
        assert [line.split(":line ")[1].split(":")[0] for line in lines] == ["5", "8", "11", "14"]


@pytest.mark.django_db
def test_the_depth_is_an_upper_bound_of_the_syntax_tree() -> None:
    assert expression_shape("1+1").depth == 2
    assert expression_shape("f(a.b, c.d.e)").depth == 4
    assert expression_shape("l.map(x, l.map(y, y + 1))").comprehension_depth == 2
    assert expression_shape("(" * 30 + "1" + ")" * 30).depth == 31
    # Ordinary expressions are far from the defaults.
    compile_expression("inputs.name + '-' + string(index) + (has(item.id) ? 'y' : 'n')")


@pytest.mark.parametrize(
    ("source", "items"),
    [
        ("trigger.payload.map(x, 'a')", 40_000),
        ("l.map(x, l.map(y, l.map(z, 'a')))", 100),
        ("s.split('').map(c, c + c)", 0),
    ],
)
def test_an_evaluation_over_budget_is_refused_before_it_runs(source, items) -> None:
    context = {"trigger": {"payload": [0] * items}, "l": [0] * items, "s": "x" * 20_000}
    with pytest.raises(ExpressionError, match=r"over limits\.expression_cost \(10000000\)"):
        evaluate(source, context)


def test_an_evaluation_within_budget_runs() -> None:
    context = {"l": list(range(100)), "big": list(range(40_000))}
    assert len(evaluate("l.map(x, l.map(y, x + y))", context)) == 100
    assert evaluate("big.size()", context) == 40_000  # no comprehension: no walk, no cost
