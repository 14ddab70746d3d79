"""`test/noop`: does nothing, outputs nothing."""

from __future__ import annotations

from typing import Any

from engine.actions import ActionContext

NAME = "test/noop"


async def run(params: dict[str, Any], context: ActionContext) -> None:
    return None
