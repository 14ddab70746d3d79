"""Reads of workflows."""

from __future__ import annotations

from django.db.models import QuerySet

from teams.models import Team
from workflows.models import WorkflowDefinition


def _with_webhook(path: str) -> QuerySet[WorkflowDefinition]:
    # jsonb containment on the current version's triggers: one scan of the current versions,
    # cheap at the scale of a few thousand workflows (a GIN index on spec->'triggers' is the
    # next step beyond that). Paths are unique across all teams (workflows.services).
    return WorkflowDefinition.objects.filter(
        current_version__spec__triggers__contains=[{"type": "webhook", "path": path}]
    )


def workflow_by_webhook_path(*, path: str) -> WorkflowDefinition | None:
    """The workflow whose current version has a webhook trigger on `path` (`/hooks/…`)."""
    return _with_webhook(path).select_related("team", "current_version").first()


def webhook_path_taken(*, path: str, by_other_than: WorkflowDefinition) -> bool:
    return _with_webhook(path).exclude(id=by_other_than.id).exists()


def workflow_list(*, team: Team) -> QuerySet[WorkflowDefinition]:
    return WorkflowDefinition.objects.filter(
        team=team, current_version__isnull=False
    ).select_related("current_version")


def workflow_get(*, team: Team, name: str) -> WorkflowDefinition | None:
    try:
        return workflow_list(team=team).get(name=name)  # unique per team: no ORDER BY needed
    except WorkflowDefinition.DoesNotExist:
        return None
