"""Typed values of a workflow document's mappings, each wrong one reported at its path and line
with the default in its place (a base of the validator)."""

from __future__ import annotations

from typing import cast

from core.bounds import count_problem, duration_problem
from core.durations import parse_duration
from workflows.schema.document import Document, join


class ValueReader:
    doc: Document

    def _required(self, mapping: dict, key: str, path: str) -> object:
        if key not in mapping:
            self.doc.missing(path, key)
            return None
        return mapping[key]

    def _string(self, mapping: dict, key: str, path: str, *, default: str) -> str:
        value = mapping.get(key, default)
        if not isinstance(value, str):
            self.doc.error(join(path, key), "must be a string")
            return default
        return value

    def _boolean(self, mapping: dict, key: str, path: str) -> bool:
        value = mapping.get(key, False)
        if not isinstance(value, bool):
            self.doc.error(join(path, key), "must be true or false")
            return False
        return value

    def _int(self, mapping: dict, key: str, path: str, *, minimum: int, default: int = 0) -> int:
        value = mapping.get(key, default)
        problem = count_problem(value, minimum=minimum)
        if problem:
            self.doc.error(join(path, key), problem)
            return default
        return cast(int, value)

    def _duration(self, mapping: dict, key: str, path: str) -> float | None:
        if key not in mapping:
            return None
        try:
            seconds = parse_duration(mapping[key])
        except ValueError as exc:
            self.doc.error(join(path, key), str(exc))
            return None
        if seconds <= 0:
            self.doc.error(join(path, key), "must be a duration greater than zero")
        elif problem := duration_problem(seconds):
            self.doc.error(join(path, key), problem)
        return seconds
