"""`test/sleep`: waits `seconds` (holding a slot, not a process)."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.actions import ActionContext, ActionFailed

NAME = "test/sleep"


async def run(params: dict[str, Any], context: ActionContext) -> dict[str, Any]:
    seconds = params.get("seconds", 0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ActionFailed(f"seconds must be a number >= 0, got {seconds!r}")
    await asyncio.sleep(seconds)
    return {"slept": seconds}
