"""Writes to workflows: apply a YAML document as a new version of a team's workflow."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction

from core import locks
from teams.models import Team
from teams.selectors import named_limit_names, step_limit_maxes, step_rates
from teams.signals import limit_loosened, loosens
from workflows.models import WebhookPath, WorkflowDefinition, WorkflowVersion
from workflows.schema import SchemaError, WorkflowInvalid, WorkflowSpec, validate_workflow
from workflows.schema.step_limits import StepScopeNames
from workflows.selectors import webhook_path_taken


@dataclass(frozen=True)
class Applied:
    workflow: WorkflowDefinition
    version: WorkflowVersion
    created: bool  # the workflow did not exist before
    changed: bool  # a new version was written
    warnings: list[SchemaError]  # the document's (docs/workflows.md, Warnings)


def workflow_apply(*, team: Team, content: str, name: str | None = None) -> Applied:
    """Validate and store `content` as the workflow's next version, unless it is unchanged.

    Raises workflows.schema.WorkflowInvalid (nothing written); a warning does not stop it.
    `name`, when given (the API path), must match the document's name. A version whose limits
    are looser promotes what now fits. Every named limit it lists must exist in the team
    (checked again under the team's lock, which deleting a named limit takes).
    """
    step_scope = StepScopeNames(
        limits=step_limit_maxes(team=team),
        rates={name: most for name, (_, most, _) in step_rates(team_id=team.id).items()},
    )
    validated = validate_workflow(
        content, limit_names=named_limit_names(team=team), step_scope=step_scope
    )
    spec, warnings = validated.spec, validated.warnings
    if name is not None and spec.name != name:
        message = f"must be {name!r}, the name in the request path (got {spec.name!r})"
        raise WorkflowInvalid([SchemaError(path="name", message=message, line=None)])
    content_hash = hashlib.sha256(content.encode()).hexdigest()
    with transaction.atomic():
        workflow, created = WorkflowDefinition.objects.get_or_create(team=team, name=spec.name)
        # Serialises concurrent applies of one workflow and orders them with admissions.
        locks.lock_team(team.id)
        locks.lock_workflows([workflow.id])
        workflow.refresh_from_db(fields=["current_version"])
        current = workflow.current_version
        if current is not None and current.content_hash == content_hash:
            return Applied(workflow, current, created=False, changed=False, warnings=warnings)
        _check_named_limits_exist(spec, team)
        _check_webhook_paths_free(spec, workflow)
        version = WorkflowVersion.objects.create(
            workflow=workflow,
            number=(current.number + 1) if current else 1,
            content=content,
            content_hash=content_hash,
            spec=spec.to_dict(),
            max_parallel_executions=spec.max_parallel_executions,
            on_limit=spec.on_limit,
            # An expression is evaluated per execution, stored on its row (0 here).
            max_parallel_per_key=spec.max_parallel_per_key
            if isinstance(spec.max_parallel_per_key, int)
            else 0,
            max_queued=spec.max_queued,
            limits=list(spec.limits),
            rate_max=spec.rate_max,
            rate_period=timedelta(seconds=spec.rate_period) if spec.rate_max else None,
            rate_per_key=spec.rate_per_key,
            debounce=None if spec.debounce is None else timedelta(seconds=spec.debounce),
            on_pause=spec.on_pause,
            retention_completed=_seconds(spec.retention_completed),
            retention_failed=_seconds(spec.retention_failed),
        )
        workflow.current_version = version
        workflow.save(update_fields=["current_version"])
        _webhook_paths_replace(workflow, spec)
        if current is not None and (
            loosens(current.max_parallel_executions, version.max_parallel_executions)
            or loosens(current.max_parallel_per_key, version.max_parallel_per_key)
            or loosens(current.rate_max, version.rate_max)
        ):
            limit_loosened.send(sender=WorkflowVersion, team_id=team.id)
    return Applied(workflow, version, created=created, changed=True, warnings=warnings)


def _seconds(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def _check_named_limits_exist(spec: WorkflowSpec, team: Team) -> None:
    """A named limit deleted since the document was validated (under the team's lock now)."""
    known = named_limit_names(team=team)
    errors = [
        SchemaError(path=f"limits[{i}]", message=f"unknown named limit {name!r}", line=None)
        for i, name in enumerate(spec.limits)
        if name not in known
    ]
    step_known = step_limit_maxes(team=team)
    errors += [
        SchemaError(
            path=f"steps[{i}].limits", message=f"unknown named limit {limit.name!r}", line=None
        )
        for i, step in enumerate(spec.steps)
        for limit in step.limits
        if limit.name not in step_known
    ]
    if errors:
        raise WorkflowInvalid(errors)


def _check_webhook_paths_free(spec: WorkflowSpec, workflow: WorkflowDefinition) -> None:
    """`POST /hooks/<path>` carries no team, so a path belongs to one workflow of all teams."""
    hooks = [(i, t.path) for i, t in enumerate(spec.triggers) if t.type == "webhook" and t.path]
    if not hooks:
        return
    # Serialises the check-then-write with concurrent applies of other teams' workflows.
    locks.lock_webhook_paths()
    errors = [
        SchemaError(
            path=f"triggers[{i}].path",
            message=f"webhook path {path!r} is already used by another workflow",
            line=None,
        )
        for i, path in hooks
        if webhook_path_taken(path=path, by_other_than=workflow)
    ]
    if errors:
        raise WorkflowInvalid(errors)


def _webhook_paths_replace(workflow: WorkflowDefinition, spec: WorkflowSpec) -> None:
    """The webhook paths of the workflow become those of its new current version."""
    WebhookPath.objects.filter(workflow=workflow).delete()
    WebhookPath.objects.bulk_create(
        WebhookPath(workflow=workflow, path=t.path, secret=t.secret, anonymous=t.auth == "none")
        for t in spec.triggers
        if t.type == "webhook" and t.path
    )
