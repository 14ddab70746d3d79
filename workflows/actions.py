"""The action registry: every action a step may name, with the function that runs it.

Workflows validate action names here without importing the engine (imports point down); the
engine fills it: each module of engine/actions registers itself when the engine app loads, so
adding an action is adding a module there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_ACTIONS: dict[str, Callable[..., Any]] = {}


def action_register(name: str, run: Callable[..., Any]) -> None:
    _ACTIONS[name] = run


def action_names() -> frozenset[str]:
    return frozenset(_ACTIONS)


def action_get(name: str) -> Callable[..., Any] | None:
    return _ACTIONS.get(name)
