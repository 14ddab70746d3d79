"""`test/fail`: fails with `message`."""

from __future__ import annotations

from typing import Any

from engine.actions import ActionContext, ActionFailed

NAME = "test/fail"


async def run(params: dict[str, Any], context: ActionContext) -> None:
    raise ActionFailed(str(params.get("message", "test/fail")))
