"""Executions: run a workflow, list, get and cancel executions (CONTRACT §5)."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import UTC, datetime
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import (
    ADMISSION_RESPONSES,
    IDEMPOTENCY_HEADER,
    TeamApi,
    admission_response,
    idempotency_key,
    json_object,
)
from api.errors import ApiError
from api.serializers import ErrorOutput, ExecutionDetailOutput, ExecutionOutput
from executions.models import Execution, Status
from executions.selectors import execution_get, execution_list, execution_queue_positions
from executions.services.idempotency import execution_admit_once
from executions.services.lifecycle import execution_cancel
from teams.auth import ApiKeyAuthentication
from teams.models import ApiKey, Team
from workflows.models import WorkflowDefinition
from workflows.selectors import api_key_with_workflow


class RunKeyAuthentication(ApiKeyAuthentication):
    """The API key, its team and the workflow named in the path with its current version, in
    one query. DRF makes an authenticator per request: `workflow` is this request's
    (`request.successful_authenticator`)."""

    workflow: WorkflowDefinition | None = None

    def lookup(self, request: Request, key_hash: str) -> ApiKey | None:
        name = request.parser_context["kwargs"]["workflow"]
        api_key, self.workflow = api_key_with_workflow(key_hash=key_hash, name=name)
        return api_key


class RunApi(TeamApi):
    authentication_classes = [RunKeyAuthentication]

    class RunInput(serializers.Serializer):
        inputs = serializers.DictField(required=False, allow_null=True)

    @extend_schema(
        operation_id="run_workflow",
        request=RunInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses=ADMISSION_RESPONSES,
    )
    def post(self, request: Request, workflow: str) -> Response:
        body = json_object(request.body)
        serializer = self.RunInput(data=body)
        if not serializer.is_valid() or set(body) - {"inputs"}:
            unknown = sorted(set(body) - {"inputs"})
            detail = f"unknown keys {unknown}" if unknown else "'inputs' must be an object"
            raise ApiError(400, "invalid_inputs", f'{detail}; the body is {{"inputs": {{…}}}}')
        authenticator = request.successful_authenticator
        definition = (
            authenticator.workflow if isinstance(authenticator, RunKeyAuthentication) else None
        )
        if definition is None:
            raise ApiError(404, "workflow_not_found", f"no workflow {workflow!r}")
        admission = execution_admit_once(
            team=self.team,
            workflow=definition,
            inputs=serializer.validated_data.get("inputs"),
            trigger={"type": "api"},
            idempotency_key=idempotency_key(request),
        )
        return admission_response(admission)


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
        output = ExecutionOutput(executions, many=True, context=_placed(executions))
        return Response({"executions": output.data, "next_cursor": next_cursor})


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
        if after[0].tzinfo is None:
            raise ValueError("no time zone")
        # In UTC, as the query compares: 0001-01-01T00:00+05:00 is out of range there.
        return after[0].astimezone(UTC), after[1]
    except (ValueError, OverflowError, binascii.Error, UnicodeDecodeError):
        raise ApiError(400, "invalid_filter", "cursor: not a cursor this API returned") from None


def _placed(executions: list[Execution]) -> dict[str, Any]:
    """The serializer context of ExecutionOutput: the queue positions of the queued ones."""
    return {"queue_positions": execution_queue_positions(executions=executions)}


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
        execution = _team_execution(self.team, execution_id)
        return Response(ExecutionDetailOutput(execution, context=_placed([execution])).data)


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
        execution_cancel(execution.id, reason="cancelled through the API")
        return Response({"execution_id": execution.id, "status": Status.CANCELLED})
