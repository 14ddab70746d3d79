"""Bounds on a CEL expression, checked before the CEL library sees it (`limits:` in mantle.yaml).

The library's parser recurses once per operator of a chain (`1+1+…`, `a.a.…`, `x==x==…`) and
crashes the process (SIGSEGV) near 50,000 of them, so an expression's length, size and depth are
measured here first, on its tokens: the depth is an upper bound of its syntax tree's (each
operator adds at most one level, each bracket one more). Its evaluation is bounded by cost: a
comprehension (`map`, `filter`, `all`, `exists`, `exists_one`) over n items costs about n² in the
library (it rebuilds the result list at each step) and each nesting multiplies by n, so before
evaluating, n^(nesting + 1) must stay under `limits.expression_cost`, n being the largest list
the expression can iterate: the largest list or map in its context or written in it as a literal,
times the number of its `+` terms (a concatenation builds a longer list than any of its parts).
A literal list needs no context, so an expression whose literals alone cost too much is refused
when its workflow is applied. Admission (a concurrency key, a priority) runs on a web worker and
evaluates under the tighter `limits.admission_expression_cost` (`admission_budget`).
docs/hostile-input.md, Expressions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<string>[rRbB]{0,2}(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
      | (?P<name>[A-Za-z_]\w*)
      | (?P<number>\.?\d[\w.]*)
      | (?P<open>[(\[{])
      | (?P<close>[)\]}])
      | (?P<comma>,)
      | (?P<operator>&&|\|\||[=!<>]=|.)""",
    re.VERBOSE | re.DOTALL,
)
COMPREHENSIONS = frozenset({"map", "filter", "all", "exists", "exists_one"})


@dataclass(frozen=True)
class Shape:
    length: int
    nodes: int
    depth: int
    comprehension_depth: int
    names: frozenset[str]  # identifiers not after a dot: the variables it may read
    literal_items: int  # elements of its largest list or map literal
    terms: int  # operands of its `+` operators, 1 without any


class _Group:
    """One bracket's content: its depth is that of its deepest comma-separated part."""

    def __init__(self, comprehension_depth: int, literal: bool = False) -> None:
        self.comprehension_depth = comprehension_depth
        self.literal = literal  # a list or map literal: its elements are counted
        self.elements = 0
        self.deepest = 0
        self.operators = 0
        self.child = 0

    def end_part(self) -> None:
        self.deepest = max(self.deepest, self.operators + self.child)
        self.operators = self.child = 0

    def depth(self) -> int:
        self.end_part()
        return self.deepest + 1


@functools.lru_cache(maxsize=1024)
def expression_shape(source: str) -> Shape:
    stack = [_Group(0)]
    nodes, comprehension_depth, literal_items, terms = 0, 0, 0, 1
    names: set[str] = set()
    previous: tuple[str, str] = ("", "")
    for match in _TOKEN.finditer(source):
        kind, text = match.lastgroup or "", match[0]
        if kind == "space":
            continue
        nodes += 1
        top = stack[-1]
        if top.literal and top.elements == 0 and kind != "close":
            top.elements = 1
        if kind == "open":
            macro = text == "(" and previous[0] == "name" and previous[1] in COMPREHENSIONS
            level = top.comprehension_depth + macro
            comprehension_depth = max(comprehension_depth, level)
            # `[` after a value indexes it (`a[0]`); anywhere else it opens a list literal.
            indexing = text == "[" and previous[0] in {"name", "close", "string", "number"}
            stack.append(_Group(level, literal=text == "{" or (text == "[" and not indexing)))
        elif kind == "close" and len(stack) > 1:
            group = stack.pop()
            literal_items = max(literal_items, group.elements)
            stack[-1].child = max(stack[-1].child, group.depth())
        elif kind == "comma":
            top.end_part()
            top.elements += top.literal
        elif kind == "operator":
            top.operators += 1
            terms += text == "+"
        elif kind == "name" and previous[1] != ".":
            names.add(text)
        previous = (kind, text)
    # Unclosed brackets: the library reports the syntax error; count them as closed here.
    while len(stack) > 1:
        depth = stack.pop().depth()
        stack[-1].child = max(stack[-1].child, depth)
    return Shape(
        len(source),
        nodes,
        stack[0].depth(),
        comprehension_depth,
        frozenset(names),
        literal_items,
        terms,
    )


def expression_check(source: str) -> str | None:
    """Why the library must not compile `source`, or None."""
    limits = settings.MANTLE.limits
    if len(source) > limits.expression_length:
        return (
            f"the expression is {len(source)} characters long, over "
            f"limits.expression_length ({limits.expression_length})"
        )
    shape = expression_shape(source)
    if shape.nodes > limits.expression_nodes:
        return (
            f"the expression has {shape.nodes} terms, over "
            f"limits.expression_nodes ({limits.expression_nodes})"
        )
    if shape.depth > limits.expression_depth:
        return (
            f"the expression nests {shape.depth} levels deep, over "
            f"limits.expression_depth ({limits.expression_depth})"
        )
    return None


_ADMISSION: ContextVar[bool] = ContextVar("admission", default=False)


@contextmanager
def admission_budget() -> Iterator[None]:
    """Expressions evaluated (or checked) inside are held to limits.admission_expression_cost."""
    token = _ADMISSION.set(True)
    try:
        yield
    finally:
        _ADMISSION.reset(token)


def expression_cost_check(source: str, context: dict[str, Any]) -> str | None:
    """Why evaluating `source` against `context` would cost too much, or None. With an empty
    context: whether its literals alone would (checked when its workflow is applied)."""
    shape = expression_shape(source)
    if not shape.comprehension_depth:
        return None
    # split() turns a string into a list as long as the string.
    strings = "split" in source
    largest = max(
        (_largest(context[name], strings) for name in shape.names if name in context), default=0
    )
    items = max(largest, shape.literal_items, 1) * shape.terms
    cost = items ** (shape.comprehension_depth + 1)
    name = "admission_expression_cost" if _ADMISSION.get() else "expression_cost"
    limit = getattr(settings.MANTLE.limits, name)
    if cost <= limit:
        return None
    return (
        f"comprehensions nested {shape.comprehension_depth} deep over up to {items} items "
        f"would cost about {cost:.3g}, over limits.{name} ({limit})"
    )


def _largest(value: Any, strings: bool) -> int:
    largest = 0
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            largest = max(largest, len(value))
            stack.extend(value.values())
        elif isinstance(value, list):
            largest = max(largest, len(value))
            stack.extend(value)
        elif strings and isinstance(value, str):
            largest = max(largest, len(value))
    return largest
