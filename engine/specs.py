"""Each workflow version's spec, read from the database once per process (a version never changes
once applied)."""

from __future__ import annotations

from core.caches import BoundedCache
from workflows.models import WorkflowVersion
from workflows.schema import WorkflowSpec

_SPECS: BoundedCache[int, WorkflowSpec] = BoundedCache()


def spec_by_id(version_id: int) -> WorkflowSpec:
    """The spec of a version known by its id, read once per process."""
    spec = _SPECS.get(version_id)
    if spec is None:
        raw = WorkflowVersion.objects.values_list("spec", flat=True).get(id=version_id)
        spec = _SPECS.put(version_id, WorkflowSpec.from_dict(raw))
    return spec


def spec_kept(version_id: int) -> WorkflowSpec | None:
    """The spec if this process has read it already (no query)."""
    return _SPECS.get(version_id)
