"""What every expression function shares: its failure, and how it names and checks an
argument's type (docs/workflows.md, Functions)."""

from __future__ import annotations

import datetime


class FunctionFailed(Exception):
    """A function was called with a value it cannot handle; the message says which."""


def string_argument(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise FunctionFailed(f"{name}: expected a string, got {type_name(value)}")
    return value


def type_name(value: object) -> str:
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
