"""The functions expressions may call: CEL's own, and upstream Mantle's with upstream's semantics
(Go's strconv, fmt ``%v``, encoding/json and time layouts), docs/workflows.md, Functions.

Every function is listed with the argument counts it takes, so that an unknown function or a
wrong arity is a validation error when a workflow is applied rather than a failed run.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workflows.expressions.arguments import FunctionFailed, string_argument, type_name
from workflows.expressions.go_time import format_timestamp, parse_timestamp


@dataclass(frozen=True)
class Signature:
    arities: frozenset[int]  # argument counts, the receiver of a member call not counted
    member: bool  # called as value.name(…) (else as name(…))
    global_too: bool = False  # a member function CEL also accepts as name(value, …)


# CEL's own functions (the CEL library provides them) and its macros.
BUILTINS: dict[str, Signature] = {
    **{
        name: Signature(frozenset({1}), member=False)
        for name in ("int", "uint", "double", "string", "bytes", "timestamp", "duration")
    },
    "dyn": Signature(frozenset({1}), member=False),
    "type": Signature(frozenset({1}), member=False),
    "has": Signature(frozenset({1}), member=False),
    "size": Signature(frozenset({0}), member=True, global_too=True),
    **{
        name: Signature(frozenset({1}), member=True)
        for name in ("contains", "startsWith", "endsWith", "matches")
    },
    **{
        name: Signature(frozenset({0}), member=True)
        for name in (
            "getFullYear",
            "getMonth",
            "getDayOfYear",
            "getDayOfMonth",
            "getDate",
            "getDayOfWeek",
            "getHours",
            "getMinutes",
            "getSeconds",
            "getMilliseconds",
        )
    },
    **{
        name: Signature(frozenset({2}), member=True)
        for name in ("all", "exists", "exists_one", "filter")
    },
    "map": Signature(frozenset({2, 3}), member=True),
}


def to_lower(value: object) -> str:
    return string_argument("toLower", value).lower()


def to_upper(value: object) -> str:
    return string_argument("toUpper", value).upper()


def trim(value: object) -> str:
    return string_argument("trim", value).strip()


# The longest string replace() may build: chained, each call can multiply a string's length
# (docs/hostile-input.md, Expressions).
MAX_REPLACED_LENGTH = 1 << 20


def replace(value: object, old: object, new: object) -> str:
    text, old, new = (string_argument("replace", part) for part in (value, old, new))
    matches = text.count(old) if old else len(text) + 1
    length = len(text) + matches * (len(new) - len(old))
    if length > MAX_REPLACED_LENGTH:
        raise FunctionFailed(
            f"replace: the result would be {length} characters, over {MAX_REPLACED_LENGTH}"
        )
    return text.replace(old, new)


def split(value: object, separator: object) -> list[str]:
    text, separator = string_argument("split", value), string_argument("split", separator)
    # Go's strings.Split with an empty separator splits into characters.
    return list(text) if separator == "" else text.split(separator)


_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)


def parse_int(value: object) -> int:
    text = string_argument("parseInt", value)
    if not _GO_INT.fullmatch(text):
        raise FunctionFailed(f'parseInt: parsing "{text}": invalid syntax')
    number = int(text)
    if not -(2**63) <= number < 2**63:
        raise FunctionFailed(f'parseInt: parsing "{text}": value out of range')
    return number


def parse_float(value: object) -> float:
    text = string_argument("parseFloat", value)
    if not _GO_FLOAT.fullmatch(text):
        raise FunctionFailed(f'parseFloat: parsing "{text}": invalid syntax')
    number = float(text)
    if math.isinf(number) and "inf" not in text.lower():
        raise FunctionFailed(f'parseFloat: parsing "{text}": value out of range')
    return number


def to_string(value: object) -> str:
    """Go's ``fmt.Sprintf("%v", value)``, as upstream's toString."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "NULL_VALUE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, bytes):
        return "[" + " ".join(str(byte) for byte in value) + "]"
    if isinstance(value, list):
        return "[" + " ".join(to_string(item) for item in value) + "]"
    if isinstance(value, dict):
        pairs = sorted((to_string(key), to_string(item)) for key, item in value.items())
        return "map[" + " ".join(f"{key}:{item}" for key, item in pairs) + "]"
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
    return str(value)


def _go_float(value: float) -> str:
    """Go's %v of a float64: the shortest digits, in exponent form below 1e-4 or from 1e6."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    number = decimal.Decimal(repr(value))
    if value == 0 or -4 <= number.adjusted() < 6:
        return format(number.normalize(), "f")
    return _go_exponent(number)


def default(value: object, fallback: object) -> object:
    """Inside a comprehension over its variable, ``default`` only sees values (a missing key has
    already failed the evaluation): null falls back. Elsewhere see expressions.evaluate."""
    return fallback if value is None else value


def flatten(value: object) -> list[object]:
    if not isinstance(value, list):
        raise FunctionFailed(f"flatten: expected a list, got {type_name(value)}")
    flat: list[object] = []
    for item in value:
        flat.extend(item if isinstance(item, list) else [item])
    return flat


def obj(*pairs: object) -> dict[str, object]:
    if len(pairs) % 2:
        raise FunctionFailed(
            f"obj: requires an even number of arguments (key-value pairs), got {len(pairs)}"
        )
    result: dict[str, object] = {}
    for i in range(0, len(pairs), 2):
        key = pairs[i]
        if not isinstance(key, str):
            message = f"obj: key at position {i} must be a string, got {type_name(key)}"
            raise FunctionFailed(message)
        result[key] = pairs[i + 1]
    return result


def json_encode(value: object) -> str:
    """Go's json.Marshal: compact, map keys sorted, ``<``, ``>`` and ``&`` escaped."""
    return _go_json(value)


def _go_json(value: object) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        text = json.dumps(value, ensure_ascii=False)
        return (
            text.replace("<", "\\u003c")
            .replace(">", "\\u003e")
            .replace("&", "\\u0026")
            .replace("\u2028", "\\u2028")
            .replace("\u2029", "\\u2029")
        )
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FunctionFailed(f"jsonEncode: json: unsupported value: {_go_float(value)}")
        return _go_json_float(value)
    if isinstance(value, list):
        return "[" + ",".join(_go_json(item) for item in value) + "]"
    if isinstance(value, dict):
        items = sorted((str(key), item) for key, item in value.items())
        return "{" + ",".join(f"{_go_json(key)}:{_go_json(item)}" for key, item in items) + "}"
    if isinstance(value, datetime.datetime):
        return json.dumps(value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z"))
    raise FunctionFailed(f"jsonEncode: json: unsupported type: {type_name(value)}")


def _go_json_float(value: float) -> str:
    """encoding/json's float64: plain from 1e-6 to below 1e21, else exponent form (``1e-07``
    written ``1e-7``)."""
    number = decimal.Decimal(repr(value))
    if value == 0 or 1e-6 <= abs(value) < 1e21:
        return format(number.normalize(), "f")
    return re.sub(r"e([+-])0(\d)$", r"e\1\2", _go_exponent(number))


def _go_exponent(number: decimal.Decimal) -> str:
    exponent = number.adjusted()
    mantissa = format(number.scaleb(-exponent).normalize(), "f")
    return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


def json_decode(value: object) -> object:
    """Go's json.Decoder.Decode: the first JSON value of the text (what follows is ignored),
    integers as int when they fit in 64 bits, other numbers as double."""
    text = string_argument("jsonDecode", value)
    try:
        decoded, _ = _DECODER.raw_decode(text.lstrip(" \t\r\n"))
    except ValueError as exc:
        raise FunctionFailed(f"jsonDecode: {exc}") from None
    return decoded


def _decode_int(text: str) -> int | float:
    number = int(text)
    return number if -(2**63) <= number < 2**63 else float(number)


def _refuse_constant(name: str) -> object:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


_DECODER = json.JSONDecoder(parse_int=_decode_int, parse_constant=_refuse_constant)

# Upstream Mantle's functions: the callable, and how it may be called.
UPSTREAM: dict[str, tuple[Callable[..., Any], Signature]] = {
    "toLower": (to_lower, Signature(frozenset({0}), member=True)),
    "toUpper": (to_upper, Signature(frozenset({0}), member=True)),
    "trim": (trim, Signature(frozenset({0}), member=True)),
    "replace": (replace, Signature(frozenset({2}), member=True)),
    "split": (split, Signature(frozenset({1}), member=True)),
    "parseInt": (parse_int, Signature(frozenset({1}), member=False)),
    "parseFloat": (parse_float, Signature(frozenset({1}), member=False)),
    "toString": (to_string, Signature(frozenset({1}), member=False)),
    "default": (default, Signature(frozenset({2}), member=False)),
    "flatten": (flatten, Signature(frozenset({1}), member=False)),
    "obj": (obj, Signature(frozenset({2, 4, 6, 8, 10}), member=False)),
    "jsonEncode": (json_encode, Signature(frozenset({1}), member=False)),
    "jsonDecode": (json_decode, Signature(frozenset({1}), member=False)),
    "parseTimestamp": (parse_timestamp, Signature(frozenset({1}), member=False)),
    "formatTimestamp": (format_timestamp, Signature(frozenset({2}), member=False)),
}
SIGNATURES: dict[str, Signature] = {
    **BUILTINS,
    **{name: signature for name, (_, signature) in UPSTREAM.items()},
}
CALLABLES: dict[str, Callable[..., Any]] = {name: run for name, (run, _) in UPSTREAM.items()}
