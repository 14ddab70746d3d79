"""`test/raise`: raises `exception` (SystemExit, MemoryError, RecursionError, RuntimeError), as
an action with a bug would; its step fails and the worker runs on (docs/hostile-input.md)."""

from __future__ import annotations

from typing import Any

from engine.actions import ActionContext, ActionFailed

NAME = "test/raise"
RAISABLE: dict[str, type[BaseException]] = {
    "SystemExit": SystemExit,
    "MemoryError": MemoryError,
    "RecursionError": RecursionError,
    "RuntimeError": RuntimeError,
}


async def run(params: dict[str, Any], context: ActionContext) -> None:
    name = str(params.get("exception", "RuntimeError"))
    if name not in RAISABLE:
        raise ActionFailed(f"test/raise: exception must be one of {', '.join(RAISABLE)}")
    raise RAISABLE[name]("raised by test/raise")
