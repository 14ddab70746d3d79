"""What an expression of a step may read: the variables in scope, the declared inputs and the
steps of the workflow (a step read is a dependency, so it must exist and not be the step)."""

from __future__ import annotations

from dataclasses import dataclass

from workflows.expression_check import Usage

VARIABLES = frozenset({"inputs", "steps", "trigger", "env", "execution"})
FAN_OUT_VARIABLES = frozenset({"item", "index"})


@dataclass(frozen=True)
class Scope:
    inputs: frozenset[str]  # declared input names
    steps: frozenset[str]  # every step name of the workflow
    step: object  # the name of the step the expression belongs to
    fan_out: bool  # params of a for_each step: item and index are in scope


def scope_problems(usage: Usage, scope: Scope) -> list[str]:
    problems = list(usage.problems)
    names = VARIABLES | FAN_OUT_VARIABLES if scope.fan_out else VARIABLES
    for variable in sorted(usage.variables - names):
        if variable in FAN_OUT_VARIABLES:
            problems.append(f'"{variable}" is only in scope in the params of a for_each step')
        else:
            known = ", ".join(sorted(names))
            problems.append(f'undeclared variable "{variable}" (in scope: {known})')
    for variable, key in sorted(usage.fields):
        if variable == "inputs" and key not in scope.inputs:
            problems.append(f'undeclared input "{key}"')
    for step in sorted(usage.steps):
        if step == scope.step:
            problems.append(f'step "{step}" cannot read its own result')
        elif step not in scope.steps:
            problems.append(f'unknown step "{step}"')
    return problems
