"""Actions a step can run, one module each: a module of this package with `NAME` and an async
`run(params, context)` is registered in workflows.actions under its `NAME` when the engine app
loads (adding an action is adding a module).

Actions run on the step worker's event loop, many at once: an action waits (`await`) and never
blocks. The runner cancels an action's task when the attempt is given up (cancel, timeout, a
lost lease): the action needs no cancellation logic of its own."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from workflows.actions import action_get, action_register


@dataclass(frozen=True)
class ActionContext:
    """What the step worker shares with every action: one HTTP client (its connection pool)."""

    http: httpx.AsyncClient


class ActionFailed(Exception):
    """The action ran and failed; `output` (e.g. an HTTP error response) is kept on the step.
    `retryable=False`: the same attempt would fail the same way (an egress refusal), the step's
    retry does not apply."""

    def __init__(self, message: str, *, output: Any = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.output = output
        self.retryable = retryable


Action = Callable[[dict[str, Any], ActionContext], Awaitable[Any]]


def actions_register() -> None:
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        action_register(module.NAME, module.run)


def get_action(name: str) -> Action:
    action = action_get(name)
    if action is None:
        raise ActionFailed(f"unknown action {name!r}")
    return action
