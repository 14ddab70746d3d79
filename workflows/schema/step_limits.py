"""A step's `limits:` (docs/limits.md, Step scope): named limits, each a name or
`{name, units}` (units default 1), that the step holds while it runs. Checked when the workflow
is applied against the limits its team's steps may list (the team's own and the global ones):
an unknown name, or more units than the limit's max (the step could never run), is an error at
its path and line."""

from __future__ import annotations

import re
from collections.abc import Mapping

from teams.models import NAMED_LIMIT_NAME
from workflows.schema.document import Document, index, join
from workflows.schema.spec import StepLimit

_KEYS = frozenset({"name", "units"})
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
