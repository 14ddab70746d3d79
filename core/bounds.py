"""The one place that says how large a number or a duration may be wherever it enters Mantle: a
workflow's YAML, an API body or query string, a CLI argument (docs/hostile-input.md, Bounds).

A count (a limit, a queue's bound, a retry's attempts) must fit the database's integer columns;
a duration must fit Python's datetime arithmetic (`started_at + timedelta(seconds=…)`), and a
product maximum keeps both sane long before either overflows.
"""

from __future__ import annotations

import math

from core.durations import parse_duration

MAX_COUNT = 2**31 - 1  # PostgreSQL's integer, the columns that store limits and counts
MAX_DURATION = 30 * 24 * 3600.0  # seconds: 30 days, any timeout, debounce, period or delay
MAX_DURATION_TEXT = "30 days (720h)"


def count_problem(value: object, *, minimum: int = 0, maximum: int = MAX_COUNT) -> str | None:
    """Why `value` is not an integer from `minimum` to `maximum`, or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        return f"must be an integer from {minimum} to {maximum}"
    return None


def duration_problem(seconds: float) -> str | None:
    """Why a parsed duration is too long to be stored or added to a datetime, or None."""
    if not math.isfinite(seconds) or seconds > MAX_DURATION:
        return f"must be at most {MAX_DURATION_TEXT}"
    return None


def count_argument(text: str, *, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    """A count from a command-line argument; ValueError naming the bound otherwise."""
    try:
        number = int(text.strip())
    except ValueError:
        raise ValueError(f"must be an integer from {minimum} to {maximum}, got {text!r}") from None
    problem = count_problem(number, minimum=minimum, maximum=maximum)
    if problem:
        raise ValueError(problem)
    return number


def duration_argument(text: str | int | float) -> float:
    """Seconds of a duration from a command line or a request body; ValueError naming the
    problem (a bad form, or past MAX_DURATION) otherwise."""
    seconds = parse_duration(text)
    if problem := duration_problem(seconds):
        raise ValueError(problem)
    return seconds
