"""Replay an execution (docs/api.md, Replay): `POST /api/v1/executions/<id>/replay`."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
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
from api.executions import team_execution
from executions.services.replay import FAILED_STEP, LATEST, SAME, START, execution_replay

CHOICES = {"version": (SAME, LATEST), "from": (START, FAILED_STEP)}


def replay_options(body: dict[str, Any]) -> dict[str, str]:
    """`version` and `from` of a body (defaults "same" and "start"): 400 `invalid_request`."""
    unknown = sorted(set(body) - set(CHOICES))
    if unknown:
        raise ApiError(400, "invalid_request", f"unknown keys {unknown}")
    options = {}
    for key, allowed in CHOICES.items():
        value = body.get(key, allowed[0])
        if value not in allowed:
            raise ApiError(400, "invalid_request", f"{key}: one of {list(allowed)}")
        options[key] = value
    return options


class ExecutionReplayApi(TeamApi):
    @extend_schema(
        operation_id="replay_execution",
        request=inline_serializer(
            "ReplayInput",
            {
                "version": serializers.ChoiceField(choices=[SAME, LATEST], required=False),
                "from": serializers.ChoiceField(choices=[START, FAILED_STEP], required=False),
            },
        ),
        parameters=[IDEMPOTENCY_HEADER],
        responses=ADMISSION_RESPONSES,
    )
    def post(self, request: Request, execution_id: uuid.UUID) -> Response:
        options = replay_options(json_object(request.body))
        original = team_execution(self.team, execution_id)
        admission = execution_replay(
            original=original,
            version=options["version"],
            start=options["from"],
            idempotency_key=idempotency_key(request),
        )
        response = admission_response(admission)
        response.data["replay_of"] = str(admission.execution.replay_of_id or "") or None
        response.data["reused_steps"] = admission.execution.reused_steps
        return response
