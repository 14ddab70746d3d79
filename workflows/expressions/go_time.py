"""parseTimestamp and formatTimestamp with upstream Mantle's semantics: Go's time layouts, in
UTC (docs/workflows.md, Functions)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable

from workflows.expressions.arguments import FunctionFailed, string_argument, type_name

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
    text = string_argument("parseTimestamp", value)
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
        raise FunctionFailed(f"formatTimestamp: expected a timestamp, got {type_name(value)}")
    moment = value.astimezone(datetime.UTC)
    return _LAYOUT_ELEMENT.sub(
        lambda match: _layout_element(match[0], moment), string_argument("formatTimestamp", layout)
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
