"""Durations as written in mantle.yaml and workflows: ``500ms``, ``30s``, ``5m``, ``1h30m``, or a
plain number of seconds. Settings read them without loading the workflow validator."""

from __future__ import annotations

import math
import re

_PLAIN_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str | int | float) -> float:
    """Seconds from ``500ms``, ``30s``, ``5m``, ``2h``, ``1h30m`` or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: {_DURATION_HINT}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and _PLAIN_SECONDS.fullmatch(value.strip()):
        seconds = float(value.strip())
    elif isinstance(value, str) and _DURATION.fullmatch(value.strip()):
        seconds = sum(
            float(amount) * _DURATION_UNITS[unit]
            for amount, unit in _DURATION_PART.findall(value.strip())
        )
    else:
        raise ValueError(f"invalid duration {value!r}: {_DURATION_HINT}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"invalid duration {value!r}: must be a finite number >= 0")
    return seconds


_DURATION_HINT = "use seconds or a value like 500ms, 30s, 5m, 2h or 1h30m"
