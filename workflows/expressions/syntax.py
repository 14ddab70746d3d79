"""CEL source → a small syntax tree, for what the CEL library cannot tell: which steps an
expression reads, and which names and functions (with how many arguments) it uses.

The library (common-expression-language) evaluates; it exposes no syntax tree, only the sorted
names an expression mentions. So the grammar of the CEL spec is parsed here once more (a Pratt
parser over a tokenizer), only after the library has accepted the source and the expression
limits have bounded its depth: syntax errors keep the library's own messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<string>[rRbB]{0,2}(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
      | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?[uU]?)
      | (?P<name>[A-Za-z_]\w*)
      | (?P<punct>&&|\|\||[=!<>]=|[-+*/%!<>?:.,()\[\]{}])""",
    re.VERBOSE | re.DOTALL,
)
# Binary operators by precedence (CEL spec: || < && < relations < + - < * / %).
_BINARY = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 3,
    "<=": 3,
    ">": 3,
    ">=": 3,
    "in": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
}
_LITERALS = {"true": True, "false": False, "null": None}
# Macros bind their first argument as a variable over the rest: list.map(x, x * 2).
COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})


class SyntaxProblem(Exception):
    pass


@dataclass(frozen=True)
class Node:
    pass


@dataclass(frozen=True)
class Name(Node):
    name: str


@dataclass(frozen=True)
class Literal(Node):
    value: object


@dataclass(frozen=True)
class Select(Node):
    operand: Node
    field: str


@dataclass(frozen=True)
class Index(Node):
    operand: Node
    index: Node


@dataclass(frozen=True)
class Call(Node):
    function: str
    target: Node | None  # the receiver of a member call: target.function(args)
    args: tuple[Node, ...]
    span: tuple[int, int] = (0, 0)  # of a global call in the source: where it starts and ends
    arg_spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Operator(Node):
    operator: str  # a binary operator, "!", "-" (negation) or "?:"
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Collection(Node):
    items: tuple[Node, ...]  # a list's items, or a map's keys and values alternating
    is_map: bool


def parse(source: str) -> Node:
    """The syntax tree of ``source``; SyntaxProblem when it is not CEL this parser knows."""
    return _Parser(source).parse()


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens: list[tuple[str, str, int]] = []
        offset = 0
        while offset < len(source):
            match = _TOKEN.match(source, offset)
            if match is None:
                raise SyntaxProblem(f"unexpected character {source[offset]!r}")
            if match.lastgroup != "space":
                self.tokens.append((match.lastgroup or "", match[0], offset))
            offset = match.end()
        self.tokens.append(("end", "", len(source)))
        self.position = 0

    def parse(self) -> Node:
        node = self.expression()
        if self.peek()[0] != "end":
            raise SyntaxProblem(f"unexpected {self.peek()[1]!r}")
        return node

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.position]

    def take(self, text: str | None = None) -> tuple[str, str, int]:
        token = self.tokens[self.position]
        if text is not None and token[1] != text:
            raise SyntaxProblem(f"expected {text!r}, found {token[1] or 'the end'!r}")
        self.position += 1
        return token

    def accept(self, text: str) -> bool:
        if self.peek()[1] == text and self.peek()[0] in ("punct", "name"):
            self.position += 1
            return True
        return False

    def expression(self) -> Node:
        condition = self.binary(1)
        if not self.accept("?"):
            return condition
        then = self.binary(1)
        self.take(":")
        otherwise = self.expression()
        return Operator("?:", (condition, then, otherwise))

    def binary(self, minimum: int) -> Node:
        left = self.unary()
        while True:
            kind, text, _ = self.peek()
            precedence = _BINARY.get(text) if kind in ("punct", "name") else None
            if precedence is None or precedence < minimum:
                return left
            self.position += 1
            right = self.binary(precedence + 1)
            left = Operator(text, (left, right))

    def unary(self) -> Node:
        kind, text, _ = self.peek()
        if kind == "punct" and text in ("!", "-"):
            self.position += 1
            return Operator(text, (self.unary(),))
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.accept("."):
                field = self.name()[1]
                if self.accept("("):
                    node = Call(field, node, self.arguments(")")[0])
                else:
                    node = Select(node, field)
            elif self.accept("["):
                node = Index(node, self.expression())
                self.take("]")
            else:
                return node

    def name(self) -> tuple[str, str, int]:
        token = self.take()
        if token[0] != "name":
            raise SyntaxProblem(f"expected a name, found {token[1] or 'the end'!r}")
        return token

    def arguments(self, closing: str) -> tuple[tuple[Node, ...], tuple[tuple[int, int], ...]]:
        """The comma-separated expressions up to ``closing``, and where each one is."""
        items: list[Node] = []
        spans: list[tuple[int, int]] = []
        while not self.accept(closing):
            start = self.peek()[2]
            items.append(self.expression())
            spans.append((start, self.end()))
            if not self.accept(","):
                self.take(closing)
                break
        return tuple(items), tuple(spans)

    def end(self) -> int:
        """Where the last token taken ends."""
        _, text, start = self.tokens[self.position - 1]
        return start + len(text)

    def primary(self) -> Node:
        kind, text, start = self.take()
        if kind == "punct" and text == ".":  # a leading dot: the name in the root scope
            kind, text, start = self.name()
        if kind == "name" and text in _LITERALS:
            return Literal(_LITERALS[text])
        if kind == "name" and text in _BINARY:
            raise SyntaxProblem(f"unexpected {text!r}")
        if kind == "name":
            if self.accept("("):
                args, spans = self.arguments(")")
                return Call(text, None, args, (start, self.end()), spans)
            if self.peek()[1] == "{":
                raise SyntaxProblem("message construction is not supported")
            return Name(text)
        if kind == "number":
            return Literal(_number(text))
        if kind == "string":
            return Literal(_string(text))
        if text == "(":
            node = self.expression()
            self.take(")")
            return node
        if text == "[":
            return Collection(self.arguments("]")[0], is_map=False)
        if text == "{":
            return Collection(self.entries(), is_map=True)
        raise SyntaxProblem(f"unexpected {text or 'end of expression'!r}")

    def entries(self) -> tuple[Node, ...]:
        items: list[Node] = []
        while not self.accept("}"):
            items.append(self.expression())
            self.take(":")
            items.append(self.expression())
            if not self.accept(","):
                self.take("}")
                break
        return tuple(items)


def _number(text: str) -> int | float:
    text = text.rstrip("uU")
    if text[:2] in ("0x", "0X"):
        return int(text, 16)
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)


def _string(text: str) -> str | bytes:
    body = text.lstrip("rRbB")
    prefix = text[: len(text) - len(body)].lower()
    quote = 3 if body[:3] in ("'''", '"""') else 1
    inner = body[quote:-quote]
    if "r" not in prefix and "\\" in inner:
        inner = inner.encode("latin-1", "backslashreplace").decode("unicode-escape")
    return inner.encode() if "b" in prefix else inner
