"""Pause and resume in the admin (docs/operations.md, Pausing during an incident): actions on
the teams', workflows' and named limits' lists, through executions.services.pauses. executions
extends those admins (teams and workflows, below it, know nothing of executions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from executions.services.pauses import (
    PauseChange,
    limit_pause_set,
    team_pause_set,
    workflow_pause_set,
)
from teams.admin import NamedLimitAdmin
from teams.models import NamedLimit
from workflows.admin import WorkflowDefinitionAdmin
from workflows.models import WorkflowDefinition


def _apply(
    request: HttpRequest, rows: QuerySet[Any], change: Callable[[Any], PauseChange], done: str
) -> None:
    try:
        changed = sum(change(row).changed for row in rows)
    except ValueError as exc:
        messages.error(request, str(exc))
        return
    messages.success(request, f"{changed} {done}.")


def _actions(set_paused: Callable[..., PauseChange], keyword: str) -> list[Callable[..., None]]:
    @admin.action(description="Pause the selected (running ones finish)")
    def pause(
        model_admin: admin.ModelAdmin[Any], request: HttpRequest, rows: QuerySet[Any]
    ) -> None:
        _apply(request, rows, lambda row: set_paused(**{keyword: row}, paused=True), "paused")

    @admin.action(description="Resume the selected (their queues are promoted)")
    def resume(
        model_admin: admin.ModelAdmin[Any], request: HttpRequest, rows: QuerySet[Any]
    ) -> None:
        _apply(request, rows, lambda row: set_paused(**{keyword: row}, paused=False), "resumed")

    return [pause, resume]


TEAM_PAUSE_ACTIONS = _actions(team_pause_set, "team")


@admin.display(description="paused", boolean=True)
def paused(row: Model) -> bool:
    return getattr(row, "paused_at", None) is not None


admin.site.unregister(WorkflowDefinition)


@admin.register(WorkflowDefinition)
class PausableWorkflowAdmin(WorkflowDefinitionAdmin):
    list_display = [*WorkflowDefinitionAdmin.list_display, paused]
    actions = _actions(workflow_pause_set, "workflow")


admin.site.unregister(NamedLimit)


@admin.register(NamedLimit)
class PausableNamedLimitAdmin(NamedLimitAdmin):
    list_display = [*NamedLimitAdmin.list_display, paused]
    actions = _actions(limit_pause_set, "limit")
