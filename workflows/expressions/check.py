"""What an expression uses, read from its syntax tree: the variables, the steps (``steps['x']``,
``steps.x``) and the functions with their argument counts — checked when a workflow is applied.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from workflows.expressions.functions import SIGNATURES
from workflows.expressions.syntax import (
    COMPREHENSIONS,
    Call,
    Collection,
    Index,
    Literal,
    Name,
    Node,
    Operator,
    Select,
    parse,
)


@dataclass(frozen=True)
class Usage:
    variables: frozenset[str]  # names read from the context (comprehension variables excluded)
    fields: frozenset[tuple[str, str]]  # (variable, key) read as variable.key or variable['key']
    steps: frozenset[str]  # steps read by name
    problems: tuple[str, ...]  # unknown functions, wrong arities, steps read by a computed name


@functools.lru_cache(maxsize=1024)
def expression_usage(source: str) -> Usage:
    """Raise SyntaxProblem when ``source`` does not parse (the CEL library accepted it first)."""
    walk = _Walk()
    walk.visit(parse(source), frozenset())
    return Usage(
        frozenset(walk.variables),
        frozenset(walk.fields),
        frozenset(walk.steps),
        tuple(dict.fromkeys(walk.problems)),
    )


class _Walk:
    def __init__(self) -> None:
        self.variables: set[str] = set()
        self.fields: set[tuple[str, str]] = set()
        self.steps: set[str] = set()
        self.problems: list[str] = []

    def visit(self, node: Node, bound: frozenset[str]) -> None:
        key = _root_key(node, bound)
        if key is not None:
            self.variables.add(key[0])
            self.fields.add(key)
            if key[0] == "steps":
                self.steps.add(key[1])
            return
        if isinstance(node, Name):
            if node.name in bound:
                return
            if node.name == "steps":
                self.problems.append(
                    "read a step by its name, as steps['name'] or steps.name "
                    "(the steps an expression reads are its dependencies)"
                )
            self.variables.add(node.name)
        elif isinstance(node, Select):
            self.visit(node.operand, bound)
        elif isinstance(node, Index):
            self.visit(node.operand, bound)
            self.visit(node.index, bound)
        elif isinstance(node, Call):
            self.call(node, bound)
        elif isinstance(node, Operator | Collection):
            children = node.operands if isinstance(node, Operator) else node.items
            for child in children:
                self.visit(child, bound)

    def call(self, node: Call, bound: frozenset[str]) -> None:
        self.check_signature(node)
        if node.target is not None:
            self.visit(node.target, bound)
        args = node.args
        if node.function in COMPREHENSIONS and node.target is not None and args:
            if not isinstance(args[0], Name):
                self.problems.append(f"{node.function}() needs a variable name first")
                return
            bound = bound | {args[0].name}
            args = args[1:]
        for arg in args:
            self.visit(arg, bound)

    def check_signature(self, node: Call) -> None:
        signature = SIGNATURES.get(node.function)
        if signature is None:
            self.problems.append(f'unknown function "{node.function}"')
            return
        if signature.member and node.target is None and not signature.global_too:
            self.problems.append(f'"{node.function}" is called on a value: x.{node.function}(…)')
            return
        if not signature.member and node.target is not None:
            name = node.function
            self.problems.append(f'"{name}" is not a method: call it as {name}(…)')
            return
        count = len(node.args) - (1 if node.target is None and signature.member else 0)
        if count not in signature.arities:
            expected = " or ".join(str(n) for n in sorted(signature.arities))
            plural = "" if expected == "1" else "s"
            self.problems.append(
                f"{node.function}() takes {expected} argument{plural}, got {count}"
            )


def _root_key(node: Node, bound: frozenset[str]) -> tuple[str, str] | None:
    """``(variable, key)`` when ``node`` is ``variable.key`` or ``variable['key']``."""
    if isinstance(node, Select) and isinstance(node.operand, Name):
        name, key = node.operand.name, node.field
    elif (
        isinstance(node, Index)
        and isinstance(node.operand, Name)
        and isinstance(node.index, Literal)
        and isinstance(node.index.value, str)
    ):
        name, key = node.operand.name, node.index.value
    else:
        return None
    return None if name in bound else (name, key)
