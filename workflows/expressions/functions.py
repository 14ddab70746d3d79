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


class FunctionFailed(Exception):
    """A function was called with a value it cannot handle; the message says which."""


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


def _string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise FunctionFailed(f"{name}: expected a string, got {_type_name(value)}")
    return value


def to_lower(value: object) -> str:
    return _string("toLower", value).lower()


def to_upper(value: object) -> str:
    return _string("toUpper", value).upper()


def trim(value: object) -> str:
    return _string("trim", value).strip()


# The longest string replace() may build: chained, each call can multiply a string's length
# (docs/hostile-input.md, Expressions).
MAX_REPLACED_LENGTH = 1 << 20


def replace(value: object, old: object, new: object) -> str:
    text, old, new = _string("replace", value), _string("replace", old), _string("replace", new)
    matches = text.count(old) if old else len(text) + 1
    length = len(text) + matches * (len(new) - len(old))
    if length > MAX_REPLACED_LENGTH:
        raise FunctionFailed(
            f"replace: the result would be {length} characters, over {MAX_REPLACED_LENGTH}"
        )
    return text.replace(old, new)


def split(value: object, separator: object) -> list[str]:
    text, separator = _string("split", value), _string("split", separator)
    # Go's strings.Split with an empty separator splits into characters.
    return list(text) if separator == "" else text.split(separator)


_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)


def parse_int(value: object) -> int:
    text = _string("parseInt", value)
    if not _GO_INT.fullmatch(text):
        raise FunctionFailed(f'parseInt: parsing "{text}": invalid syntax')
    number = int(text)
    if not -(2**63) <= number < 2**63:
        raise FunctionFailed(f'parseInt: parsing "{text}": value out of range')
    return number


def parse_float(value: object) -> float:
    text = _string("parseFloat", value)
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
        raise FunctionFailed(f"flatten: expected a list, got {_type_name(value)}")
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
            message = f"obj: key at position {i} must be a string, got {_type_name(key)}"
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
    raise FunctionFailed(f"jsonEncode: json: unsupported type: {_type_name(value)}")


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
    text = _string("jsonDecode", value)
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

# parseTimestamp's layouts, tried in upstream's order (Go reference layouts on the right).
_TIMESTAMP_LAYOUTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})",
            re.IGNORECASE,
        ),
        "rfc3339",  # 2006-01-02T15:04:05Z07:00 (fractions too, as Go accepts)
    ),
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})"), "local"),
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})"), "date"),  # 2006-01-02
    (re.compile(r"(\d{2})/(\d{2})/(\d{4})"), "us"),  # 01/02/2006
    (re.compile(r"([A-Za-z]{3}) (\d{1,2}), (\d{4})"), "text"),  # Jan 2, 2006
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def parse_timestamp(value: object) -> datetime.datetime:
    text = _string("parseTimestamp", value)
    for pattern, layout in _TIMESTAMP_LAYOUTS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        try:
            return _timestamp(layout, match.groups())
        except ValueError:
            continue
    raise FunctionFailed(
        f'parseTimestamp: unable to parse "{text}" (tried RFC3339, ISO 8601 date, and common '
        "formats)"
    )


def _timestamp(layout: str, parts: tuple[str, ...]) -> datetime.datetime:
    utc = datetime.UTC
    if layout == "rfc3339":
        year, month, day, hour, minute, second, fraction, zone = parts
        micro = int((fraction or ".0")[1:7].ljust(6, "0"))
        offset = datetime.timedelta(0)
        if zone.upper() != "Z":
            sign = -1 if zone[0] == "-" else 1
            offset = sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        moment = datetime.datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            micro,
            tzinfo=datetime.timezone(offset),
        )
        return moment.astimezone(utc)
    if layout == "local":
        numbers = [int(part) for part in parts]
        return datetime.datetime(
            numbers[0], numbers[1], numbers[2], numbers[3], numbers[4], numbers[5], tzinfo=utc
        )
    if layout == "date":
        year, month, day = parts
    elif layout == "us":
        month, day, year = parts
    else:
        month_name, day, year = parts
        if month_name.lower() not in _MONTHS:
            raise ValueError(month_name)
        month = str(_MONTHS.index(month_name.lower()) + 1)
    return datetime.datetime(int(year), int(month), int(day), tzinfo=utc)


# Go layout elements, longest first where one is the prefix of another.
_LAYOUT_ELEMENT = re.compile(
    r"January|Jan|Monday|Mon|MST|2006|002|Z07:00|Z0700|Z07|-07:00|-0700|-07|"
    r"[.,](?:0+|9+)(?!\d)|01|02|03|04|05|06|15|_2|PM|pm|1|2|3|4|5"
)


def format_timestamp(value: object, layout: object) -> str:
    """Go's ``time.Format`` with a reference layout (``2006-01-02T15:04:05Z07:00``), in UTC."""
    if not isinstance(value, datetime.datetime):
        raise FunctionFailed(f"formatTimestamp: expected a timestamp, got {_type_name(value)}")
    moment = value.astimezone(datetime.UTC)
    return _LAYOUT_ELEMENT.sub(
        lambda match: _layout_element(match[0], moment), _string("formatTimestamp", layout)
    )


def _layout_element(element: str, moment: datetime.datetime) -> str:
    hour12 = moment.hour % 12 or 12
    if element[0] in ".," and element[1:2] in ("0", "9"):
        digits = f"{moment.microsecond:06d}000"[: len(element) - 1]
        if element[1] == "9":
            digits = digits.rstrip("0")
            return element[0] + digits if digits else ""
        return element[0] + digits
    fixed: dict[str, Callable[[], str]] = {
        "January": lambda: moment.strftime("%B"),
        "Jan": lambda: moment.strftime("%b"),
        "Monday": lambda: moment.strftime("%A"),
        "Mon": lambda: moment.strftime("%a"),
        "MST": lambda: "UTC",
        "2006": lambda: f"{moment.year:04d}",
        "06": lambda: f"{moment.year % 100:02d}",
        "002": lambda: f"{moment.timetuple().tm_yday:03d}",
        "01": lambda: f"{moment.month:02d}",
        "1": lambda: str(moment.month),
        "02": lambda: f"{moment.day:02d}",
        "_2": lambda: f"{moment.day:2d}",
        "2": lambda: str(moment.day),
        "15": lambda: f"{moment.hour:02d}",
        "03": lambda: f"{hour12:02d}",
        "3": lambda: str(hour12),
        "04": lambda: f"{moment.minute:02d}",
        "4": lambda: str(moment.minute),
        "05": lambda: f"{moment.second:02d}",
        "5": lambda: str(moment.second),
        "PM": lambda: "PM" if moment.hour >= 12 else "AM",
        "pm": lambda: "pm" if moment.hour >= 12 else "am",
        "Z07:00": lambda: "Z",
        "Z0700": lambda: "Z",
        "Z07": lambda: "Z",
        "-07:00": lambda: "+00:00",
        "-0700": lambda: "+0000",
        "-07": lambda: "+00",
    }
    return fixed[element]()


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


def _type_name(value: object) -> str:
    names = {bool: "bool", int: "int", float: "double", str: "string", bytes: "bytes"}
    if value is None:
        return "null"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, datetime.datetime):
        return "timestamp"
    return names.get(type(value), type(value).__name__)
