"""Durations as written in mantle.yaml and workflows: Go's forms (``300ms``, ``1h30m``, ``2.5s``,
``.5h``, ``100us``; units ``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``, ``h``), or a plain number of
seconds. Settings read them without loading the workflow validator."""

from __future__ import annotations

import math
import re
from decimal import Decimal

_PLAIN_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_NUMBER = r"(?:\d+\.?\d*|\.\d+)"
_UNIT = "ns|us|\u00b5s|\u03bcs|ms|s|m|h"
_DURATION = re.compile(rf"\+?(?:{_NUMBER}(?:{_UNIT}))+")
_DURATION_PART = re.compile(rf"({_NUMBER})({_UNIT})")
_DURATION_UNITS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "\u00b5s": Decimal("1e-6"),
    "\u03bcs": Decimal("1e-6"),
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}


def parse_duration(value: str | int | float) -> float:
    """Seconds from a Go duration (``500ms``, ``1h30m``, ``2.5s``, ``100us``) or a plain number."""
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: {_DURATION_HINT}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and _PLAIN_SECONDS.fullmatch(value.strip()):
        seconds = float(value.strip())
    elif isinstance(value, str) and _DURATION.fullmatch(value.strip()):
        seconds = float(
            sum(
                Decimal(amount) * _DURATION_UNITS[unit]
                for amount, unit in _DURATION_PART.findall(value.strip())
            )
        )
    else:
        raise ValueError(f"invalid duration {value!r}: {_DURATION_HINT}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"invalid duration {value!r}: must be a finite number >= 0")
    return seconds


_DURATION_HINT = "use seconds or a value like 500ms, 30s, 5m, 2h or 1h30m"


_DAYS = re.compile(r"(\d+)d")


def parse_retention(value: str | int | float) -> float:
    """Seconds of a retention horizon: whole days (``30d``) or any duration above; 0 keeps for
    ever (docs/operations.md, Retention)."""
    if isinstance(value, str) and (days := _DAYS.fullmatch(value.strip())):
        return float(int(days.group(1)) * 86_400)
    return parse_duration(value)
