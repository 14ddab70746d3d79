"""Workflows: list, get, and apply a YAML document as a new version (docs/api.md)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import TeamApi
from api.errors import ApiError
from api.serializers import ErrorOutput
from core import locks
from workflows.redaction import content_redacted
from workflows.schema.graph import run_order
from workflows.selectors import workflow_get, workflow_list
from workflows.services import workflow_apply


class WorkflowOutput(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField(source="current_version.number")
    description = serializers.CharField(source="current_version.spec.description")
    max_parallel_executions = serializers.IntegerField(
        source="current_version.max_parallel_executions"
    )
    on_limit = serializers.CharField(source="current_version.on_limit")
    webhooks = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField(source="current_version.created_at")

    def get_webhooks(self, workflow: Any) -> list[str]:
        triggers = workflow.current_version.spec["triggers"]
        return [t["path"] for t in triggers if t["type"] == "webhook"]


class WorkflowListApi(TeamApi):
    class WorkflowListOutput(serializers.Serializer):
        workflows = WorkflowOutput(many=True)

    @extend_schema(operation_id="list_workflows", responses={200: WorkflowListOutput})
    def get(self, request: Request) -> Response:
        return Response(
            {"workflows": WorkflowOutput(workflow_list(team=self.team), many=True).data}
        )


class WorkflowDetailApi(TeamApi):
    class WorkflowDetailOutput(WorkflowOutput):
        content = serializers.SerializerMethodField()
        steps = serializers.SerializerMethodField()

        @extend_schema_field(
            inline_serializer(
                "WorkflowStep",
                {
                    "name": serializers.CharField(),
                    "action": serializers.CharField(),
                    "depends_on": serializers.ListField(child=serializers.CharField()),
                },
                many=True,
            )
        )
        def get_steps(self, workflow: Any) -> list[dict[str, object]]:
            """The steps in the order they can run, each with its dependencies: its depends_on
            and every step its expressions read."""
            steps = {step["name"]: step for step in workflow.current_version.spec["steps"]}
            order = run_order({name: tuple(step["depends_on"]) for name, step in steps.items()})
            return [
                {
                    "name": name,
                    "action": steps[name]["action"],
                    "depends_on": steps[name]["depends_on"],
                }
                for name in order
            ]

        def get_content(self, workflow: Any) -> str:
            return content_redacted(workflow.current_version.content)

    @extend_schema(
        operation_id="get_workflow", responses={200: WorkflowDetailOutput, 404: ErrorOutput}
    )
    def get(self, request: Request, name: str) -> Response:
        workflow = workflow_get(team=self.team, name=name)
        if workflow is None:
            raise ApiError(404, "workflow_not_found", f"no workflow {name!r}")
        return Response(self.WorkflowDetailOutput(workflow).data)


class WarningOutput(serializers.Serializer):
    path = serializers.CharField()
    line = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()


class WorkflowApplyApi(TeamApi):
    class WorkflowAppliedOutput(serializers.Serializer):
        name = serializers.CharField()
        version = serializers.IntegerField()
        changed = serializers.BooleanField()
        # What was accepted as upstream accepts it (docs/workflows.md, Warnings).
        warnings = WarningOutput(many=True)

    @extend_schema(
        operation_id="apply_workflow",
        request={"application/yaml": OpenApiTypes.STR},
        responses={
            200: WorkflowAppliedOutput,
            201: WorkflowAppliedOutput,
            400: ErrorOutput,
            429: ErrorOutput,
        },
    )
    def put(self, request: Request, name: str) -> Response:
        try:
            content = request.body.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(
                400, "invalid_workflow", "the body is not UTF-8 text", errors=[]
            ) from None
        # One upload of a team is validated at a time (docs/hostile-input.md, Workflow uploads):
        # a 1 MiB document takes seconds of a web worker, and four at once held them all.
        with transaction.atomic():
            if not locks.try_lock(locks.Namespace.WORKFLOW_UPLOAD, self.team.id):
                raise ApiError(
                    429,
                    "upload_in_progress",
                    "another workflow upload of this team is being validated; "
                    "send this one when it ends",
                )
            applied = workflow_apply(team=self.team, content=content, name=name)
        body = {
            "name": applied.workflow.name,
            "version": applied.version.number,
            "changed": applied.changed,
            "warnings": applied.warnings,
        }
        return Response(
            self.WorkflowAppliedOutput(body).data,
            status=status.HTTP_201_CREATED if applied.created else status.HTTP_200_OK,
        )


class WorkflowApi(WorkflowDetailApi, WorkflowApplyApi):
    """`/api/v1/workflows/<name>`: GET and PUT, each its own view, on one route."""
