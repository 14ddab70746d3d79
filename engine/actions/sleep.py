"""`test/sleep`: waits `seconds`, or less when the attempt is cancelled."""

from __future__ import annotations

from typing import Any

from engine.actions import ActionContext, ActionFailed

NAME = "test/sleep"


def run(params: dict[str, Any], context: ActionContext) -> dict[str, Any]:
    seconds = params.get("seconds", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ActionFailed(f"seconds must be a number >= 0, got {seconds!r}")
    if context.cancelled.wait(seconds):
        raise ActionFailed("sleep interrupted")
    return {"slept": seconds}
