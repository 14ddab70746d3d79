"""How a moment is shown to people (the admin, the dashboard): one format everywhere, to the
second, in UTC, and "—" for none."""

from __future__ import annotations

from datetime import UTC, datetime

NONE_SHOWN = "—"


def time_shown(moment: datetime | None) -> str:
    """2026-12-07 03:01:38 UTC."""
    if moment is None:
        return NONE_SHOWN
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
