"""`test/echo`: the output is the (rendered) params."""

from __future__ import annotations

from typing import Any

from engine.actions import ActionContext

NAME = "test/echo"


async def run(params: dict[str, Any], context: ActionContext) -> dict[str, Any]:
    return params
