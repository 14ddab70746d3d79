"""Finding, compiling, evaluating and rendering CEL expressions inside ``{{ … }}``.

Names in scope when a step runs: ``inputs``, ``steps`` (step name → ``{"output", "status",
"error"}``), ``trigger``, ``env``, ``item``, ``index`` and ``execution``; the functions are CEL's
and upstream Mantle's (functions.py).

CEL is strict about types: ``1 + 2.0`` and ``inputs.count + 1`` with a float ``count`` are errors
(no int/double coercion), and a missing map key is an error rather than ``null`` — use
``has(inputs.x)`` or ``'x' in inputs`` to test for presence.
"""

from __future__ import annotations

import datetime
import functools
import json
import re

import cel

from workflows.expressions.functions import CALLABLES
from workflows.expressions.limits import expression_check, expression_cost_check
from workflows.expressions.syntax import (
    COMPREHENSIONS,
    Call,
    Collection,
    Index,
    Node,
    Operator,
    Select,
    SyntaxProblem,
    parse,
)

# Non-greedy: "{{ a }} and {{ b }}" is two expressions. A CEL map literal may sit inside the
# braces as long as it does not itself contain "}}" (write "{ 'a': {'b': 1} }" with a space).
_EXPRESSION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_PARSE_ERROR = re.compile(
    r"Failed to parse expression .*?: ERROR: <input>:\d+:(\d+): (.*)", re.DOTALL
)
_CEL_TYPE_NAMES = {
    bool: "bool",
    int: "int",
    float: "double",
    str: "string",
    bytes: "bytes",
    list: "list",
    dict: "map",
    type(None): "null",
}


class ExpressionError(Exception):
    """A CEL expression failed to compile or to evaluate."""

    def __init__(self, *, expression: str, message: str) -> None:
        super().__init__(f'expression "{expression}" failed: {message}')
        self.expression = expression
        self.message = message

    def __reduce__(self) -> tuple[object, tuple[()]]:
        # Keyword-only __init__ defeats the default exception pickling (tasks cross processes).
        rebuild = functools.partial(type(self), expression=self.expression, message=self.message)
        return rebuild, ()


def find_expressions(value: object) -> list[str]:
    """Return the source of every ``{{ … }}`` in a string, or in the values of dicts and lists."""
    if isinstance(value, str):
        return [match.group(1).strip() for match in _EXPRESSION.finditer(value)]
    if isinstance(value, dict):
        return [source for item in value.values() for source in find_expressions(item)]
    if isinstance(value, list):
        return [source for item in value for source in find_expressions(item)]
    return []


def sole_expression(text: str) -> str | None:
    """The inner source when ``text`` is exactly one ``{{ … }}`` (whitespace around allowed)."""
    matches = list(_EXPRESSION.finditer(text))
    if len(matches) == 1 and matches[0].group(0) == text.strip():
        return matches[0].group(1).strip()
    return None


def compile_expression(source: str) -> None:
    """Raise ExpressionError when ``source`` (a bare CEL expression, no braces) does not parse,
    or when the lists it writes out would cost too much to iterate whatever its inputs."""
    source = source.strip()
    _program(source)
    too_costly = expression_cost_check(source, {})
    if too_costly:
        raise ExpressionError(expression=_abridged(source), message=too_costly)


def evaluate(source: str, context: dict) -> object:
    """Evaluate one bare CEL expression against ``context`` and return the native Python value."""
    source = source.strip()
    _program(source)
    too_costly = expression_cost_check(source, context)
    if too_costly:
        raise ExpressionError(expression=_abridged(source), message=too_costly)
    try:
        rewritten, defaults = _lazy_defaults(source)
    except SyntaxProblem as exc:
        raise ExpressionError(expression=source, message=str(exc)) from None
    failures: list[ExpressionError] = []
    try:
        if not defaults:
            return _compiled(rewritten).execute({**context, **CALLABLES})
        return _compiled(rewritten).execute(_lazy_context(context, defaults, failures))
    except KeyError as exc:
        # The library raises a bare KeyError whose text is only the key.
        raise ExpressionError(expression=source, message=f"no such key {exc.args[0]!r}") from None
    except Exception as exc:  # the library raises Type/Value/Runtime/Index/ZeroDivision errors
        if failures:
            raise failures[0] from None
        raise ExpressionError(expression=source, message=_runtime_message(str(exc))) from None


def _lazy_context(
    context: dict, defaults: dict[str, tuple[str, str]], failures: list[ExpressionError]
) -> cel.Context:
    """``default(x, fallback)`` is upstream's non-strict function: the fallback when x is null, a
    missing key or any other error. The library evaluates a function's arguments first and fails
    on the error, so each such call was rewritten into a variable, resolved here when (and only
    when) the evaluation reaches it."""
    resolved: dict[str, object] = {}

    def resolve(name: str) -> object:
        if name not in defaults:
            return context[name]
        if name not in resolved:
            value_source, fallback_source = defaults[name]
            try:
                value = evaluate(value_source, context)
            except ExpressionError:
                value = None
            try:
                resolved[name] = evaluate(fallback_source, context) if value is None else value
            except ExpressionError as exc:
                failures.append(exc)
                raise
        return resolved[name]

    lazy = cel.Context(functions=CALLABLES)
    lazy.set_variable_resolver(resolve)
    return lazy


@functools.lru_cache(maxsize=1024)
def _lazy_defaults(source: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """``source`` with each outermost ``default(x, fallback)`` outside comprehensions replaced
    by a variable ``_defaultN``, and what each one stands for. Inside a comprehension, x may
    read the comprehension's variable, which only exists there: the plain function runs."""
    calls: list[Call] = []
    _find_defaults(parse(source), calls)
    defaults: dict[str, tuple[str, str]] = {}
    rewritten, end = [], 0
    for n, call in enumerate(calls):
        name = f"_default{n}"
        (value_start, value_end), (fallback_start, fallback_end) = call.arg_spans
        defaults[name] = (source[value_start:value_end], source[fallback_start:fallback_end])
        rewritten += [source[end : call.span[0]], name]
        end = call.span[1]
    return "".join([*rewritten, source[end:]]), defaults


def _find_defaults(node: Node, found: list[Call]) -> None:
    if isinstance(node, Call):
        if node.function == "default" and node.target is None and len(node.args) == 2:
            found.append(node)
            return
        if node.function in COMPREHENSIONS and node.target is not None:
            _find_defaults(node.target, found)
            return
        children: tuple[Node, ...] = node.args if node.target is None else (node.target, *node.args)
    elif isinstance(node, Select):
        children = (node.operand,)
    elif isinstance(node, Index):
        children = (node.operand, node.index)
    elif isinstance(node, Operator):
        children = node.operands
    elif isinstance(node, Collection):
        children = node.items
    else:
        children = ()
    for child in children:
        _find_defaults(child, found)


def _runtime_message(raw: str) -> str:
    """A function's own message, without the library's wrapping around it."""
    marker = "Python function call failed: FunctionFailed: "
    if marker not in raw:
        return raw
    message = raw.split(marker, 1)[1]
    return message.removesuffix(" Check function arguments and their types.").removesuffix(".")


def evaluate_condition(source: str, context: dict) -> bool:
    """Evaluate a step's ``if``; anything but a boolean is an error, never coerced to truthy."""
    result = evaluate(source, context)
    if not isinstance(result, bool):
        raise ExpressionError(
            expression=source.strip(),
            message=f"if must yield a boolean, got {_cel_type_name(result)}",
        )
    return result


def render(value: object, context: dict) -> object:
    """Render step params: evaluate every ``{{ … }}`` in strings, recursively in dicts and lists.

    A string that is exactly one expression yields the raw value (a list stays a list); a string
    with embedded expressions is interpolated. Dict keys and non-string scalars are left alone.
    """
    if isinstance(value, str):
        return _render_string(value, context)
    if isinstance(value, dict):
        return {key: render(item, context) for key, item in value.items()}
    if isinstance(value, list):
        return [render(item, context) for item in value]
    return value


def _render_string(text: str, context: dict) -> object:
    source = sole_expression(text)
    if source is not None:
        return evaluate(source, context)
    return _EXPRESSION.sub(lambda match: _to_text(evaluate(match.group(1), context)), text)


def _to_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default)
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return str(value)


def _json_default(value: object) -> str:
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return str(value)


def _cel_type_name(value: object) -> str:
    return _CEL_TYPE_NAMES.get(type(value), type(value).__name__)


def _program(source: str) -> cel.Program:
    if not source:
        raise ExpressionError(expression=source, message="empty expression")
    refused = expression_check(source)
    if refused:
        raise ExpressionError(expression=_abridged(source), message=refused)
    return _compiled(source)


@functools.lru_cache(maxsize=1024)
def _compiled(source: str) -> cel.Program:
    try:
        return cel.compile(source)
    except ValueError as exc:
        raise ExpressionError(expression=source, message=_parse_message(str(exc))) from None


def _abridged(source: str) -> str:
    return source if len(source) <= 80 else f"{source[:60]}… ({len(source)} characters)"


def _parse_message(raw: str) -> str:
    """Shorten the library's parse error to one line: ``column 11: Syntax error: …``."""
    match = _PARSE_ERROR.match(raw)
    if match is None:
        return raw.splitlines()[0] if raw else "invalid expression"
    column, detail = match.groups()
    return f"column {column}: {detail.splitlines()[0]}"
