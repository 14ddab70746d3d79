"""The HTTP API of CONTRACT §5: one APIView per operation; views parse input and call services.

Limits are decided by admission alone (executions.admission via executions.idempotency); errors
become JSON in mantle_site.exceptions.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import uuid
from datetime import datetime
from typing import Any

from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from executions import metrics
from executions.execution_selectors import execution_get, execution_list
from executions.idempotency import admit_once
from executions.lifecycle import cancel_execution
from executions.models import Execution, Status
from executions.selectors import team_queues
from executions.serializers import (
    AdmissionOutput,
    ConcurrencyLimitOutput,
    ErrorOutput,
    ExecutionDetailOutput,
    ExecutionOutput,
)
from mantle_site.exceptions import ApiError
from teams.models import Team
from workflows.selectors import workflow_get, workflow_list
from workflows.services import workflow_apply

IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII
IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="A retry with the same key returns the original execution (200).",
)


def idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise ApiError(400, "invalid_idempotency_key", "1 to 255 visible ASCII characters")
    return key


def admission_response(execution: Execution, *, replayed: bool) -> Response:
    """202 for a new execution, 200 for the original one of an idempotent retry."""
    return Response(
        AdmissionOutput(execution).data,
        status=status.HTTP_200_OK if replayed else status.HTTP_202_ACCEPTED,
        headers={"Location": reverse("execution-detail", args=[execution.id])},
    )


ADMISSION_RESPONSES = {
    202: AdmissionOutput,
    200: OpenApiResponse(AdmissionOutput, description="an idempotent retry: the original"),
    400: ErrorOutput,
    404: ErrorOutput,
    409: ErrorOutput,
    413: ErrorOutput,
    429: ConcurrencyLimitOutput,
}


class TeamApi(APIView):
    """Authenticated by an API key (REST_FRAMEWORK defaults); request.user is the Team."""

    @property
    def team(self) -> Team:
        return self.request.user  # type: ignore[return-value]


class RunApi(TeamApi):
    class RunInput(serializers.Serializer):
        inputs = serializers.DictField(required=False, allow_null=True)

    @extend_schema(
        operation_id="run_workflow",
        request=RunInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses=ADMISSION_RESPONSES,
    )
    def post(self, request: Request, workflow: str) -> Response:
        body = _json_object(request.body)
        serializer = self.RunInput(data=body)
        if not serializer.is_valid() or set(body) - {"inputs"}:
            unknown = sorted(set(body) - {"inputs"})
            detail = f"unknown keys {unknown}" if unknown else "'inputs' must be an object"
            raise ApiError(400, "invalid_inputs", f'{detail}; the body is {{"inputs": {{…}}}}')
        definition = workflow_get(team=self.team, name=workflow)
        if definition is None:
            raise ApiError(404, "workflow_not_found", f"no workflow {workflow!r}")
        execution, replayed = admit_once(
            team=self.team,
            workflow=definition,
            inputs=serializer.validated_data.get("inputs"),
            trigger={"type": "api"},
            idempotency_key=idempotency_key(request),
        )
        return admission_response(execution, replayed=replayed)


def parse_json(raw: bytes) -> Any:
    """JSON that PostgreSQL's jsonb can store: ValueError also on NaN, infinite numbers and
    \\u0000, which jsonb refuses."""

    def reject(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    try:
        document = json.loads(raw, parse_constant=reject)
        storable = _storable(document)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not storable:
        raise ValueError("infinite numbers and \\u0000 cannot be stored")
    return document


def _storable(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_storable(k) and _storable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable(item) for item in value)
    return True


def _json_object(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        body = parse_json(raw)
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    return body


class ExecutionListApi(TeamApi):
    class ExecutionFilter(serializers.Serializer):
        workflow = serializers.CharField(required=False, max_length=200)
        status = serializers.ChoiceField(choices=Status.choices, required=False)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)
        cursor = serializers.CharField(required=False, max_length=200)

    class ExecutionListOutput(serializers.Serializer):
        executions = ExecutionOutput(many=True)
        next_cursor = serializers.CharField(allow_null=True)

    @extend_schema(
        operation_id="list_executions",
        parameters=[ExecutionFilter],
        responses={200: ExecutionListOutput, 400: ErrorOutput},
    )
    def get(self, request: Request) -> Response:
        filters = self.ExecutionFilter(data=request.query_params)
        unknown = sorted(set(request.query_params) - set(self.ExecutionFilter().fields))
        if unknown or not filters.is_valid():
            detail = f"unknown parameters {unknown}" if unknown else _first_error(filters)
            raise ApiError(400, "invalid_filter", detail)
        params = filters.validated_data
        executions = execution_list(
            team=self.team,
            workflow=params.get("workflow"),
            status=params.get("status"),
            limit=params["limit"],
            after=_decode_cursor(params["cursor"]) if "cursor" in params else None,
        )
        full_page = len(executions) == params["limit"]
        next_cursor = _encode_cursor(executions[-1]) if full_page else None
        return Response(
            {"executions": ExecutionOutput(executions, many=True).data, "next_cursor": next_cursor}
        )


def _first_error(serializer: serializers.Serializer) -> str:
    field, messages = next(iter(serializer.errors.items()))
    return f"{field}: {messages[0]}"


def _encode_cursor(execution: Execution) -> str:
    raw = f"{execution.created_at.isoformat()}|{execution.id}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created_at, execution_id = raw.split("|")
        after = datetime.fromisoformat(created_at), uuid.UUID(execution_id)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ApiError(400, "invalid_filter", "cursor: not a cursor this API returned") from None
    if after[0].tzinfo is None:
        raise ApiError(400, "invalid_filter", "cursor: not a cursor this API returned")
    return after


def _team_execution(team: Team, execution_id: uuid.UUID) -> Execution:
    execution = execution_get(team=team, execution_id=execution_id)
    if execution is None:
        raise ApiError(404, "execution_not_found", f"no execution {execution_id}")
    return execution


class ExecutionDetailApi(TeamApi):
    @extend_schema(
        operation_id="get_execution", responses={200: ExecutionDetailOutput, 404: ErrorOutput}
    )
    def get(self, request: Request, execution_id: uuid.UUID) -> Response:
        return Response(ExecutionDetailOutput(_team_execution(self.team, execution_id)).data)


class ExecutionCancelApi(TeamApi):
    class CancelOutput(serializers.Serializer):
        execution_id = serializers.UUIDField()
        status = serializers.ChoiceField(choices=[Status.CANCELLED])

    @extend_schema(
        operation_id="cancel_execution",
        request=None,
        responses={200: CancelOutput, 404: ErrorOutput, 409: ErrorOutput},
    )
    def post(self, request: Request, execution_id: uuid.UUID) -> Response:
        execution = _team_execution(self.team, execution_id)
        cancel_execution(execution.id, reason="cancelled through the API")
        return Response({"execution_id": execution.id, "status": Status.CANCELLED})


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
        content = serializers.CharField(source="current_version.content")

    @extend_schema(
        operation_id="get_workflow", responses={200: WorkflowDetailOutput, 404: ErrorOutput}
    )
    def get(self, request: Request, name: str) -> Response:
        workflow = workflow_get(team=self.team, name=name)
        if workflow is None:
            raise ApiError(404, "workflow_not_found", f"no workflow {name!r}")
        return Response(self.WorkflowDetailOutput(workflow).data)


class WorkflowApplyApi(TeamApi):
    class WorkflowAppliedOutput(serializers.Serializer):
        name = serializers.CharField()
        version = serializers.IntegerField()
        changed = serializers.BooleanField()

    @extend_schema(
        operation_id="apply_workflow",
        request={"application/yaml": OpenApiTypes.STR},
        responses={200: WorkflowAppliedOutput, 201: WorkflowAppliedOutput, 400: ErrorOutput},
    )
    def put(self, request: Request, name: str) -> Response:
        try:
            content = request.body.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(
                400, "invalid_workflow", "the body is not UTF-8 text", errors=[]
            ) from None
        applied = workflow_apply(team=self.team, content=content, name=name)
        body = {"name": applied.workflow.name, "version": applied.version.number}
        return Response(
            self.WorkflowAppliedOutput({**body, "changed": applied.changed}).data,
            status=status.HTTP_201_CREATED if applied.created else status.HTTP_200_OK,
        )


class WorkflowApi(WorkflowDetailApi, WorkflowApplyApi):
    """`/api/v1/workflows/<name>`: GET and PUT, each its own view, on one route."""


class WorkflowQueueOutput(serializers.Serializer):
    name = serializers.CharField()
    max_parallel_executions = serializers.IntegerField()
    on_limit = serializers.CharField()
    running = serializers.IntegerField()
    queued = serializers.IntegerField()
    oldest_queued_at = serializers.DateTimeField(allow_null=True)


class QueuesApi(TeamApi):
    class QueuesOutput(serializers.Serializer):
        team = serializers.CharField(source="team.slug")
        limit = serializers.IntegerField()
        running = serializers.IntegerField()
        queued = serializers.IntegerField()
        workflows = WorkflowQueueOutput(many=True)

    @extend_schema(operation_id="get_queues", responses={200: QueuesOutput})
    def get(self, request: Request) -> Response:
        return Response(self.QueuesOutput(team_queues(team=self.team)).data)


class HealthzApi(APIView):
    """Liveness: the process answers. No database access."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(operation_id="healthz", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


class ReadyzApi(HealthzApi):
    """Readiness: the database answers."""

    @extend_schema(operation_id="readyz", responses={200: OpenApiTypes.OBJECT, 503: ErrorOutput})
    def get(self, request: Request) -> Response:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Response({"status": "ok", "database": "ok"})


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format (not an APIView: no content negotiation, no auth)."""
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)
