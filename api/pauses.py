"""Pause and resume (docs/api.md, Pause and resume): `POST /api/v1/workflows/<name>/pause`,
`/api/v1/teams/<slug>/pause` (the API key's own team) and `/api/v1/limits/<name>/pause`, each
with `/resume`; the body `{"cancel_running": true}` (optional, pause only) cancels the slot
holders too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import TeamApi, json_object
from api.errors import ApiError
from api.serializers import ErrorOutput
from executions.services.pauses import (
    PauseChange,
    limit_pause_set,
    team_pause_set,
    workflow_pause_set,
)
from teams.models import NamedLimit
from workflows.selectors import workflow_get


class PauseInput(serializers.Serializer):
    cancel_running = serializers.BooleanField(
        default=False, help_text="pause only: also cancel what is pending or running"
    )


class PauseOutput(serializers.Serializer):
    paused = serializers.BooleanField()
    paused_at = serializers.DateTimeField(allow_null=True)
    changed = serializers.BooleanField(help_text="false: it already was in that state")
    cancelled = serializers.IntegerField()
    promoted = serializers.IntegerField(help_text="queued executions a resume promoted")


class _PauseApi(TeamApi):
    """One view per action and target: `paused` says which action."""

    paused = True

    def answer(self, request: Request, change: Callable[[bool], PauseChange]) -> Response:
        given = PauseInput(data=json_object(request.body))
        given.is_valid(raise_exception=True)
        cancel_running = given.validated_data["cancel_running"]
        if cancel_running and not self.paused:
            raise ApiError(400, "invalid_request", "cancel_running applies to a pause only")
        return Response(PauseOutput(change(cancel_running)).data)


def _schema(operation_id: str) -> Any:
    return extend_schema(
        operation_id=operation_id,
        request=PauseInput,
        responses={200: PauseOutput, 400: ErrorOutput, 404: ErrorOutput},
    )


class WorkflowPauseApi(_PauseApi):
    @_schema("pause_workflow")
    def post(self, request: Request, name: str) -> Response:
        workflow = workflow_get(team=self.team, name=name)
        if workflow is None:
            raise ApiError(404, "workflow_not_found", f"no workflow {name!r}")
        return self.answer(
            request,
            lambda cancel: workflow_pause_set(
                workflow=workflow, paused=self.paused, cancel_running=cancel
            ),
        )


class WorkflowResumeApi(WorkflowPauseApi):
    paused = False

    @_schema("resume_workflow")
    def post(self, request: Request, name: str) -> Response:
        return super().post(request, name)


class TeamPauseApi(_PauseApi):
    @_schema("pause_team")
    def post(self, request: Request, slug: str) -> Response:
        if slug != self.team.slug:  # another team's: as if it did not exist
            raise ApiError(404, "team_not_found", f"no team {slug!r}")
        return self.answer(
            request,
            lambda cancel: team_pause_set(
                team=self.team, paused=self.paused, cancel_running=cancel
            ),
        )


class TeamResumeApi(TeamPauseApi):
    paused = False

    @_schema("resume_team")
    def post(self, request: Request, slug: str) -> Response:
        return super().post(request, slug)


class LimitPauseApi(_PauseApi):
    @_schema("pause_limit")
    def post(self, request: Request, name: str) -> Response:
        limit = NamedLimit.objects.filter(team=self.team, name=name).first()
        if limit is None:
            raise ApiError(404, "limit_not_found", f"no named limit {name!r}")
        return self.answer(
            request,
            lambda cancel: limit_pause_set(limit=limit, paused=self.paused, cancel_running=cancel),
        )


class LimitResumeApi(LimitPauseApi):
    paused = False

    @_schema("resume_limit")
    def post(self, request: Request, name: str) -> Response:
        return super().post(request, name)
