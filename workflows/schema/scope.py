"""What an expression of a step may read: the variables in scope and the steps of the workflow
(a step read is a dependency, so it must exist and not be the step); an undeclared input or an
unset env name is a warning."""

from __future__ import annotations

from dataclasses import dataclass

from workflows.expressions.check import Usage

VARIABLES = frozenset({"inputs", "steps", "trigger", "env", "execution"})
FAN_OUT_VARIABLES = frozenset({"item", "index"})


@dataclass(frozen=True)
class Scope:
    inputs: frozenset[str]  # declared input names
    steps: frozenset[str]  # every step name of the workflow
    step: object  # the name of the step the expression belongs to
    fan_out: bool  # params of a for_each step: item and index are in scope


# Upstream's inputs are an open map: an undeclared one is read as given (docs/workflows.md,
# Warnings).
UNDECLARED_INPUT = 'undeclared input "{}" (accepted: inputs are an open map; declare it in inputs)'
UNSET_ENV = (
    'env "{}" is not set in this configuration (env: in mantle.yaml); a run that reads it fails'
)


def undeclared_inputs(usage: Usage, declared: frozenset[str]) -> list[str]:
    return sorted(key for var, key in usage.fields if var == "inputs" and key not in declared)


def scope_warnings(usage: Usage, scope: Scope, env: frozenset[str]) -> list[str]:
    """What runs as upstream runs it but is likely a mistake: an undeclared input, an env name
    the configuration of the process applying the workflow does not set."""
    warnings = [UNDECLARED_INPUT.format(key) for key in undeclared_inputs(usage, scope.inputs)]
    unset = sorted(key for variable, key in usage.fields if variable == "env" and key not in env)
    return warnings + [UNSET_ENV.format(key) for key in unset]


def scope_problems(usage: Usage, scope: Scope) -> list[str]:
    problems = list(usage.problems)
    names = VARIABLES | FAN_OUT_VARIABLES if scope.fan_out else VARIABLES
    for variable in sorted(usage.variables - names):
        if variable in FAN_OUT_VARIABLES:
            problems.append(f'"{variable}" is only in scope in the params of a for_each step')
        else:
            known = ", ".join(sorted(names))
            problems.append(f'undeclared variable "{variable}" (in scope: {known})')
    for step in sorted(usage.steps):
        if step == scope.step:
            problems.append(f'step "{step}" cannot read its own result')
        elif step not in scope.steps:
            problems.append(f'unknown step "{step}"')
    return problems
