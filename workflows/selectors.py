"""Reads of workflows. (A request's one-query resolution of its key or hook path, with the
workflow, is the data room's: executions/resolution.py.)"""

from __future__ import annotations

from django.db.models import QuerySet

from teams.models import Team
from workflows.models import WebhookPath, WorkflowDefinition


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
