"""Reads of workflows."""

from __future__ import annotations

from typing import TypeVar

from django.db import connection
from django.db.models import Field, Model, QuerySet

from teams.models import ApiKey, Team
from workflows.models import WebhookPath, WorkflowDefinition, WorkflowVersion

M = TypeVar("M", bound=Model)


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


def _columns(model: type[Model], *, without: tuple[str, ...] = ()) -> list[Field]:
    return [f for f in model._meta.concrete_fields if f.attname not in without]


_KEY_FIELDS = _columns(ApiKey)
_TEAM_FIELDS = _columns(Team)
_WORKFLOW_FIELDS = _columns(WorkflowDefinition)
_HOOK_FIELDS = _columns(WebhookPath)
# Admission reads a version's id, limits and content hash; its content and spec only when the
# process has not parsed that version yet (executions.services.admission keeps it parsed).
_VERSION_FIELDS = _columns(WorkflowVersion, without=("content", "spec"))


def _select(*parts: tuple[str, list[Field]]) -> str:
    return ", ".join(f'{alias}."{field.column}"' for alias, fields in parts for field in fields)


# Written once per process from the models' own columns: the ORM would compile these joins anew
# on every request, which costs more than running them.
_TEAM_WORKFLOW_VERSION = _select(
    ("t", _TEAM_FIELDS), ("w", _WORKFLOW_FIELDS), ("v", _VERSION_FIELDS)
)
KEY_WITH_WORKFLOW = f"""
SELECT {_select(("k", _KEY_FIELDS))}, {_TEAM_WORKFLOW_VERSION}
  FROM teams_apikey k
  JOIN teams_team t ON t.id = k.team_id
  LEFT JOIN workflows_workflowdefinition w ON w.team_id = t.id AND w.name = %(name)s
  LEFT JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE k.key_hash = %(key_hash)s
"""
WEBHOOK = f"""
SELECT {_select(("h", _HOOK_FIELDS))}, {_TEAM_WORKFLOW_VERSION}
  FROM workflows_webhookpath h
  JOIN workflows_workflowdefinition w ON w.id = h.workflow_id
  JOIN teams_team t ON t.id = w.team_id
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE h.path = %(path)s
"""


def _row(sql: str, params: dict[str, str], *shapes: list[Field]) -> list[list[object]] | None:
    """The one row of `sql`, cut into the values of each model's fields."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    values = iter(row)
    return [[next(values) for _ in fields] for fields in shapes]


def _load(model: type[M], fields: list[Field], values: list[object]) -> M:
    return model.from_db(connection.alias, [f.attname for f in fields], values)


def api_key_with_workflow(
    *, key_hash: str, name: str
) -> tuple[ApiKey | None, WorkflowDefinition | None]:
    """The API key with its team, and the team's workflow `name` with its current version
    (None when it has none; the version's content and spec load when read): one query."""
    parts = _row(
        KEY_WITH_WORKFLOW,
        {"key_hash": key_hash, "name": name},
        _KEY_FIELDS,
        _TEAM_FIELDS,
        _WORKFLOW_FIELDS,
        _VERSION_FIELDS,
    )
    if parts is None:
        return None, None
    api_key = _load(ApiKey, _KEY_FIELDS, parts[0])
    api_key.team = _load(Team, _TEAM_FIELDS, parts[1])
    workflow_id, version_id = parts[2][0], parts[3][0]
    if workflow_id is None or version_id is None:
        return api_key, None
    workflow = _load(WorkflowDefinition, _WORKFLOW_FIELDS, parts[2])
    workflow.team = api_key.team
    workflow.current_version = _load(WorkflowVersion, _VERSION_FIELDS, parts[3])
    return api_key, workflow


def webhook_by_path(*, path: str) -> WebhookPath | None:
    """The webhook trigger on `path` (`/hooks/…`), with its workflow, team and current version
    (whose content and spec load when read): one indexed lookup."""
    parts = _row(
        WEBHOOK, {"path": path}, _HOOK_FIELDS, _TEAM_FIELDS, _WORKFLOW_FIELDS, _VERSION_FIELDS
    )
    if parts is None:
        return None
    hook = _load(WebhookPath, _HOOK_FIELDS, parts[0])
    hook.workflow = _load(WorkflowDefinition, _WORKFLOW_FIELDS, parts[2])
    hook.workflow.team = _load(Team, _TEAM_FIELDS, parts[1])
    hook.workflow.current_version = _load(WorkflowVersion, _VERSION_FIELDS, parts[3])
    return hook
