"""What a request resolves before its admission, in one query each (executions/sql/
resolution.sql): an API key with its team and the workflow it runs (`POST /api/v1/run/<name>`),
or a webhook trigger by its path with its workflow and team (`POST /hooks/<path>`), each
workflow with its current version. (The ORM would compile these joins anew on every request,
which costs more than running them.)"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model

from executions.sql import queries
from teams.models import ApiKey, Team
from workflows.models import WebhookPath, WorkflowDefinition, WorkflowVersion

M = TypeVar("M", bound=Model)


def _row(sql: str, params: dict[str, str]) -> dict[str, Any] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        names = [column.name for column in cursor.description]
    return None if row is None else dict(zip(names, row, strict=True))


def _load(model: type[M], prefix: str, row: dict[str, Any]) -> M:
    """The instance of `model` from the columns named `<prefix>.<field>` (those not read load
    when read)."""
    fields = {
        field: value
        for name, value in row.items()
        for model_name, _, field in [name.partition(".")]
        if model_name == prefix
    }
    return model.from_db(connection.alias, list(fields), list(fields.values()))


def api_key_with_workflow(
    *, key_hash: str, name: str
) -> tuple[ApiKey | None, WorkflowDefinition | None]:
    """The API key with its team, and the team's workflow `name` with its current version
    (None when it has none; the version's content and spec load when read): one query."""
    row = _row(queries["api_key_with_workflow"], {"key_hash": key_hash, "name": name})
    if row is None:
        return None, None
    api_key = _load(ApiKey, "key", row)
    api_key.team = _load(Team, "team", row)
    if row["workflow.id"] is None or row["version.id"] is None:
        return api_key, None
    workflow = _load(WorkflowDefinition, "workflow", row)
    workflow.team = api_key.team
    workflow.current_version = _load(WorkflowVersion, "version", row)
    return api_key, workflow


def webhook_by_path(*, path: str) -> WebhookPath | None:
    """The webhook trigger on `path` (`/hooks/…`), with its workflow, team and current version
    (whose content and spec load when read): one indexed lookup."""
    row = _row(queries["webhook_by_path"], {"path": path})
    if row is None:
        return None
    hook = _load(WebhookPath, "hook", row)
    hook.workflow = _load(WorkflowDefinition, "workflow", row)
    hook.workflow.team = _load(Team, "team", row)
    hook.workflow.current_version = _load(WorkflowVersion, "version", row)
    return hook
