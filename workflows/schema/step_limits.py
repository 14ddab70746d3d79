"""A step's `limits:` and `rate_limit:` (docs/limits.md, Step scope). Limits: named limits,
each a name or `{name, units}` (units default 1), that the step holds while it runs. Rate:
`{name, units, key}`, a named rate whose window each claim of the step counts its units in (per
the key's value when the rate is per key). Checked when the workflow is applied against those
its team's steps may name (the team's own and the global ones): an unknown name, more units than
the max (the step could never run), a rate without a name or a key that can never evaluate is an
error at its path and line."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teams.models import NAMED_LIMIT_NAME
from workflows.schema.document import Document, index, join
from workflows.schema.flow_control import check_template
from workflows.schema.spec import StepLimit, StepRate

_KEYS = frozenset({"name", "units"})


@dataclass(frozen=True)
class StepScopeNames:
    """What a team's steps may name: limits and rates by name, each with its max (a limit's 0:
    unlimited)."""

    limits: Mapping[str, int]
    rates: Mapping[str, int]


_NAME = re.compile(NAMED_LIMIT_NAME)


def step_limits_read(
    doc: Document, value: object, path: str, known: Mapping[str, int] | None
) -> tuple[StepLimit, ...]:
    """The step's limits in name order, the order a claim locks them in. `known`: name → max
    (0: unlimited), None when not checked (no team)."""
    if not isinstance(value, list):
        doc.error(path, "must be a list of named limits: a name or {name, units}")
        return ()
    limits: dict[str, StepLimit] = {}
    for i, item in enumerate(value):
        item_path = index(path, i)
        name, units = item, 1
        if isinstance(item, dict):
            for key in sorted(set(item) - _KEYS):
                doc.error(join(item_path, key), f'unknown key "{key}"', at_key=True)
            name, units = item.get("name"), item.get("units", 1)
            if not (isinstance(units, int) and not isinstance(units, bool) and units >= 1):
                doc.error(join(item_path, "units"), "must be an integer >= 1")
                continue
        if not (isinstance(name, str) and _NAME.fullmatch(name)):
            doc.error(item_path, f"must be the name of a named limit (^{NAMED_LIMIT_NAME}$)")
        elif name in limits:
            doc.error(item_path, f"named limit {name!r} is listed twice")
        elif known is not None and name not in known:
            doc.error(
                item_path, f"unknown named limit {name!r} (mantle limits set <team> {name} <N>)"
            )
        elif known is not None and 0 < known[name] < units:
            doc.error(
                join(item_path, "units"),
                f"{units} units of {name!r}, over its max of {known[name]}: "
                "the step could never run",
            )
        else:
            limits[name] = StepLimit(name, units)
    return tuple(limits[name] for name in sorted(limits))


_RATE_KEYS = frozenset({"name", "units", "key"})


def step_rate_read(
    doc: Document,
    value: object,
    path: str,
    known: Mapping[str, int] | None,
    input_names: frozenset[str],
) -> StepRate | None:
    """The step's rate. `known`: name → max (None: not checked); `input_names`: the
    workflow's declared inputs, which its key expression may read."""
    if value is None:
        return None
    if not isinstance(value, dict):
        doc.error(path, "must be a mapping: {name, units, key}")
        return None
    for extra in sorted(set(value) - _RATE_KEYS):
        doc.error(join(path, extra), f'unknown key "{extra}"', at_key=True)
    name, units, key = value.get("name"), value.get("units", 1), value.get("key")
    if name is None:
        doc.missing(path, "name")
        return None
    if not (isinstance(name, str) and _NAME.fullmatch(name)):
        doc.error(join(path, "name"), f"must be the name of a named rate (^{NAMED_LIMIT_NAME}$)")
        return None
    if known is not None and name not in known:
        doc.error(
            join(path, "name"),
            f"unknown named rate {name!r} (mantle rates set <team> {name} <max>/<period>)",
        )
        return None
    if not (isinstance(units, int) and not isinstance(units, bool) and units >= 1):
        doc.error(join(path, "units"), "must be an integer >= 1")
        return None
    if known is not None and known[name] < units:
        doc.error(
            join(path, "units"),
            f"{units} units of {name!r}, over its max of {known[name]}: the step could never run",
        )
        return None
    if key is not None and not check_template(doc, join(path, "key"), key, input_names):
        return None
    return StepRate(name, units, key)


def step_scope_read(
    doc: Document, step: dict, path: str, scope: StepScopeNames | None, input_names: frozenset[str]
) -> dict[str, Any]:
    """The step's `limits` and `rate` (StepSpec's fields); `scope`: None when not checked."""
    return {
        "limits": step_limits_read(
            doc,
            step.get("limits", []),
            join(path, "limits"),
            None if scope is None else scope.limits,
        ),
        "rate": step_rate_read(
            doc,
            step.get("rate_limit"),
            join(path, "rate_limit"),
            None if scope is None else scope.rates,
            input_names,
        ),
    }
