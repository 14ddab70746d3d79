"""Reads of workflows."""

from __future__ import annotations

from django.db.models import QuerySet

from teams.models import Team
from workflows.models import WebhookPath, WorkflowDefinition

# Admission reads a version's id, limits and content hash; its content and spec only when the
# process has not parsed that version yet (executions.services.admission keeps it parsed).
_VERSION_BODY = ("current_version__content", "current_version__spec")


def webhook_by_path(*, path: str) -> WebhookPath | None:
    """The webhook trigger on `path` (`/hooks/…`), with its workflow, team and current version:
    one indexed lookup."""
    return (
        WebhookPath.objects.select_related("workflow__team", "workflow__current_version")
        .defer(*(f"workflow__{field}" for field in _VERSION_BODY))
        .filter(path=path)
        .first()
    )


def webhook_path_taken(*, path: str, by_other_than: WorkflowDefinition) -> bool:
    return WebhookPath.objects.filter(path=path).exclude(workflow=by_other_than).exists()


def workflow_list(*, team: Team) -> QuerySet[WorkflowDefinition]:
    return WorkflowDefinition.objects.filter(
        team=team, current_version__isnull=False
    ).select_related("current_version")


def workflow_get(*, team: Team, name: str) -> WorkflowDefinition | None:
    try:
        return workflow_list(team=team).get(name=name)  # unique per team: no ORDER BY needed
    except WorkflowDefinition.DoesNotExist:
        return None
