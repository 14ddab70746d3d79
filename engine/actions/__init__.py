"""Actions a step can run, one module each: a module of this package with `NAME` and `run` is
registered in workflows.actions under its `NAME` when the engine app loads (adding an action is
adding a module)."""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workflows.actions import action_get, action_register


@dataclass(frozen=True)
class ActionContext:
    """Set when the runner gives up on the attempt (cancel, timeout, lost lease): an action
    that waits should wait on it and return early."""

    cancelled: threading.Event


class ActionFailed(Exception):
    """The action ran and failed; `output` (e.g. an HTTP error response) is kept on the step."""

    def __init__(self, message: str, *, output: Any = None) -> None:
        super().__init__(message)
        self.output = output


Action = Callable[[dict[str, Any], ActionContext], Any]


def actions_register() -> None:
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        action_register(module.NAME, module.run)


def get_action(name: str) -> Action:
    action = action_get(name)
    if action is None:
        raise ActionFailed(f"unknown action {name!r}")
    return action
