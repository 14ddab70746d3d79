"""Executions: run a workflow, list, get and cancel executions (docs/api.md)."""

from __future__ import annotations

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
from api.cursors import cursor_decode, cursor_encode, cursor_invalid
from api.errors import ApiError
from api.resolved import BEFORE_ADMISSION, RUNS
from api.serializers import (
    ErrorOutput,
    ExecutionDetailOutput,
    ExecutionOutput,
    StepOutput,
    StepPageOutput,
)
from executions.models import Execution, Status, StepExecution, StepStatus
from executions.resolution import api_key_with_workflow
from executions.selectors import (
    execution_get,
    execution_list,
    execution_queue_positions,
    execution_replays,
    execution_step_counts,
    execution_steps,
    steps_blocked_by,
)
from executions.services.admission import Resolved
from executions.services.idempotency import execution_admit_once, execution_schedule_once
from executions.services.lifecycle import execution_cancel
from executions.services.scheduled import run_time
from teams.auth import ApiKeyAuthentication
from teams.models import ApiKey, Team
from workflows.models import WorkflowDefinition


class RunKeyAuthentication(ApiKeyAuthentication):
    """The API key, its team and the workflow named in the path with its current version: from
    this process's cache (api.resolved; the admission checks them, `resolved`), else in one
    query. DRF makes an authenticator per request: `workflow` is this request's
    (`request.successful_authenticator`)."""

    workflow: WorkflowDefinition | None = None
    resolved: Resolved | None = None  # set when they came from the cache
    from_tables = False

    def lookup(self, request: Request, key_hash: str) -> ApiKey | None:
        entry = (key_hash, request.parser_context["kwargs"]["workflow"])
        cached = None if self.from_tables else RUNS.get(entry)
        if cached is not None:
            self.resolved = Resolved(key_hash=key_hash)
            cached_key, self.workflow = cached
            return cached_key
        self.resolved = None
        api_key, self.workflow = api_key_with_workflow(key_hash=key_hash, name=entry[1])
        if api_key is not None and api_key.is_active and self.workflow is not None:
            RUNS.put(entry, (api_key, self.workflow))
        else:
            RUNS.forget(entry)
        return api_key

    def authenticate_from_tables(self, request: Request) -> Team:
        """The team, read again: AuthenticationFailed for a key revoked since it was cached."""
        self.from_tables = True
        authenticated = self.authenticate(request)
        assert authenticated is not None, "the request was authenticated from the cache"
        return authenticated[0]


DELAY_KEYS = frozenset({"run_at", "delay"})


def delayed_until(body: dict[str, Any]) -> datetime:
    """A delayed run's time from the body's `run_at` or `delay`: 400 `invalid_schedule`."""
    try:
        return run_time(run_at=body.get("run_at"), delay=body.get("delay"))
    except ValueError as exc:
        raise ApiError(400, "invalid_schedule", str(exc)) from None


class RunApi(TeamApi):
    authentication_classes = [RunKeyAuthentication]

    class RunInput(serializers.Serializer):
        inputs = serializers.DictField(required=False, allow_null=True)
        priority = serializers.IntegerField(
            required=False, allow_null=True, min_value=0, max_value=9
        )
        run_at = serializers.CharField(required=False, help_text="a delayed run: RFC 3339")
        delay = serializers.CharField(required=False, help_text='a delayed run: "10m", "1h30m"')

    @extend_schema(
        operation_id="run_workflow",
        request=RunInput,
        parameters=[IDEMPOTENCY_HEADER],
        responses=ADMISSION_RESPONSES,
    )
    def post(self, request: Request, workflow: str) -> Response:
        authenticator = request.successful_authenticator
        assert isinstance(authenticator, RunKeyAuthentication)
        try:
            return self.run(request, workflow, team=self.team, authenticator=authenticator)
        except BEFORE_ADMISSION:
            if authenticator.resolved is None:
                raise
        # Nothing admitted, from a cached key and workflow: answer as the tables say (401 for a
        # key revoked since, 404 for a workflow deleted since, a new version's inputs).
        team = authenticator.authenticate_from_tables(request)
        return self.run(request, workflow, team=team, authenticator=authenticator)

    def run_input(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, int | None]:
        """The body's inputs and priority. The usual body (an object or null for inputs, an int
        0-9 or null for priority, nothing else) is taken as it is: RunInput would return the
        same, for the cost of building its fields on every request. RunInput decides any other
        body, and words its errors."""
        inputs, priority = body.get("inputs"), body.get("priority")
        if (
            body.keys() <= {"inputs", "priority"}
            and (inputs is None or type(inputs) is dict)
            and (priority is None or (type(priority) is int and 0 <= priority <= 9))
        ):
            return inputs, priority
        serializer = self.RunInput(data=body)
        unknown = sorted(set(body) - {"inputs", "priority", *DELAY_KEYS})
        if not serializer.is_valid() or unknown:
            if unknown:
                detail = f"unknown keys {unknown}"
            elif "inputs" in serializer.errors:
                detail = "'inputs' must be an object"
            else:
                detail = _first_error(serializer)
            shape = '{"inputs": {…}, "priority": 0-9, "run_at" or "delay"}'
            raise ApiError(400, "invalid_inputs", f"{detail}; the body is {shape}")
        return serializer.validated_data.get("inputs"), serializer.validated_data.get("priority")

    def run(
        self, request: Request, workflow: str, *, team: Team, authenticator: RunKeyAuthentication
    ) -> Response:
        body = json_object(request.body)
        inputs, priority = self.run_input(body)
        if authenticator.workflow is None:
            raise ApiError(404, "workflow_not_found", f"no workflow {workflow!r}")
        if body.keys() & DELAY_KEYS:
            return admission_response(
                execution_schedule_once(
                    team=team,
                    workflow=authenticator.workflow,
                    run_at=delayed_until(body),
                    inputs=inputs,
                    trigger={"type": "api"},
                    priority=priority,
                    idempotency_key=idempotency_key(request),
                )
            )
        admission = execution_admit_once(
            team=team,
            workflow=authenticator.workflow,
            inputs=inputs,
            trigger={"type": "api"},
            idempotency_key=idempotency_key(request),
            priority=priority,
            resolved=authenticator.resolved,
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
        params = _filters(self.ExecutionFilter, request)
        executions = execution_list(
            team=self.team,
            workflow=params.get("workflow"),
            status=params.get("status"),
            limit=params["limit"],
            after=_execution_after(params["cursor"]) if "cursor" in params else None,
        )
        full_page = len(executions) == params["limit"]
        last = executions[-1] if full_page else None
        next_cursor = cursor_encode(last.created_at.isoformat(), str(last.id)) if last else None
        output = ExecutionOutput(executions, many=True, context=_placed(executions))
        return Response({"executions": output.data, "next_cursor": next_cursor})


def _filters(filter_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The query parameters, validated by `filter_class`; an unknown one is an error too."""
    filters = filter_class(data=request.query_params)
    unknown = sorted(set(request.query_params) - set(filter_class().fields))
    if unknown or not filters.is_valid():
        detail = f"unknown parameters {unknown}" if unknown else _first_error(filters)
        raise ApiError(400, "invalid_filter", detail)
    return filters.validated_data


def _first_error(serializer: serializers.Serializer) -> str:
    field, messages = next(iter(serializer.errors.items()))
    return f"{field}: {messages[0]}"


def _execution_after(cursor: str) -> tuple[datetime, uuid.UUID]:
    created_at, execution_id = cursor_decode(cursor, parts=2)
    try:
        after = datetime.fromisoformat(created_at), uuid.UUID(execution_id)
        if after[0].tzinfo is None:
            raise ValueError("no time zone")
        # In UTC, as the query compares: 0001-01-01T00:00+05:00 is out of range there.
        return after[0].astimezone(UTC), after[1]
    except (ValueError, OverflowError):
        raise cursor_invalid() from None


def _step_after(cursor: str) -> int:
    (step_id,) = cursor_decode(cursor, parts=1)
    if not step_id.isdigit() or int(step_id) >= 2**63:
        raise cursor_invalid()
    return int(step_id)


def _placed(executions: list[Execution]) -> dict[str, Any]:
    """The serializer context of ExecutionOutput: the queue positions of the queued ones, and
    the replays of each."""
    return {
        "queue_positions": execution_queue_positions(executions=executions),
        "replays": execution_replays(executions=executions),
    }


def team_execution(team: Team, execution_id: uuid.UUID) -> Execution:
    execution = execution_get(team=team, execution_id=execution_id)
    if execution is None:
        raise ApiError(404, "execution_not_found", f"no execution {execution_id}")
    return execution


def _step_page(steps: list[StepExecution], limit: int) -> dict[str, Any]:
    """A StepPageOutput of a page of `limit` steps: a full page may have a next one."""
    next_cursor = cursor_encode(str(steps[-1].id)) if len(steps) == limit else None
    context = {"blocked_by": steps_blocked_by(steps=steps)}
    return {"steps": StepOutput(steps, many=True, context=context).data, "next_cursor": next_cursor}


class ExecutionDetailApi(TeamApi):
    # A fan-out has up to limits.fanout_items branches: the detail shows the counts and the
    # first page, ExecutionStepsApi the rest.
    FIRST_STEPS = 50

    @extend_schema(
        operation_id="get_execution", responses={200: ExecutionDetailOutput, 404: ErrorOutput}
    )
    def get(self, request: Request, execution_id: uuid.UUID) -> Response:
        execution = team_execution(self.team, execution_id)
        steps = execution_steps(execution=execution, limit=self.FIRST_STEPS)
        context = {
            **_placed([execution]),
            "steps": _step_page(steps, self.FIRST_STEPS),
            "step_counts": execution_step_counts(execution=execution),
        }
        return Response(ExecutionDetailOutput(execution, context=context).data)


class ExecutionStepsApi(TeamApi):
    class StepFilter(serializers.Serializer):
        status = serializers.ChoiceField(choices=StepStatus.choices, required=False)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)
        cursor = serializers.CharField(required=False, max_length=200)

    @extend_schema(
        operation_id="list_execution_steps",
        parameters=[StepFilter],
        responses={200: StepPageOutput, 400: ErrorOutput, 404: ErrorOutput},
    )
    def get(self, request: Request, execution_id: uuid.UUID) -> Response:
        params = _filters(self.StepFilter, request)
        execution = team_execution(self.team, execution_id)
        steps = execution_steps(
            execution=execution,
            limit=params["limit"],
            after=_step_after(params["cursor"]) if "cursor" in params else None,
            status=params.get("status"),
        )
        return Response(_step_page(steps, params["limit"]))


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
        execution = team_execution(self.team, execution_id)
        execution_cancel(execution.id, reason="cancelled through the API")
        return Response({"execution_id": execution.id, "status": Status.CANCELLED})
