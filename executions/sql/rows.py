"""Rows as types: a statement's columns are named as the fields of a dataclass, and each row
becomes one instance, so a column missing, extra or renamed fails at once (never a value read
from the wrong place) and mypy sees every field where the rows are used."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

from django.db.backends.utils import CursorWrapper

T = TypeVar("T")


def rows_as(cursor: CursorWrapper, row_type: Callable[..., T]) -> list[T]:
    """The rows of the cursor's last statement, each as `row_type(**columns)`."""
    names = [column.name for column in cursor.description]
    return [row_type(**dict(zip(names, row, strict=True))) for row in cursor.fetchall()]


def rows_grouped(
    cursor: CursorWrapper, column: str, row_type: Callable[..., T]
) -> dict[Any, list[T]]:
    """The rows of the cursor's last statement by their value of `column`, each as
    `row_type(**the other columns)`, in the statement's order."""
    names = [column.name for column in cursor.description]
    grouped: dict[Any, list[T]] = defaultdict(list)
    for row in cursor.fetchall():
        columns = dict(zip(names, row, strict=True))
        grouped[columns.pop(column)].append(row_type(**columns))
    return grouped
