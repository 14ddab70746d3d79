"""A workflow's `retention: {completed: 7d, failed: 30d}`: how long its finished executions are
kept, overriding mantle.yaml's for each key given (docs/operations.md, Retention)."""

from __future__ import annotations

from dataclasses import dataclass

from core.durations import parse_retention
from workflows.schema.document import Document

_KEYS = ("completed", "failed")


@dataclass(frozen=True)
class Retention:
    completed: float | None = None  # seconds; None: mantle.yaml's; 0: for ever
    failed: float | None = None


def retention_read(doc: Document, value: object) -> Retention:
    if value is None:
        return Retention()
    if not isinstance(value, dict):
        doc.error("retention", "must be a mapping: {completed, failed}")
        return Retention()
    for key in sorted(set(value) - set(_KEYS)):
        doc.error(f"retention.{key}", f'unknown key "{key}"', at_key=True)
    horizons: dict[str, float | None] = {}
    for key in _KEYS:
        horizons[key] = None
        if key in value:
            try:
                horizons[key] = parse_retention(value[key])
            except (TypeError, ValueError) as exc:
                doc.error(f"retention.{key}", f"{exc}, or whole days like 30d (0: keep for ever)")
    return Retention(**horizons)
