"""Named limits (docs/limits.md): `GET /api/v1/limits` (the team's and the global ones),
`PUT /api/v1/limits/<name>` `{"max": N}` (`"scope": "global"` with a staff user's key),
`DELETE /api/v1/limits/<name>` (409 `limit_in_use` while a workflow or an execution uses it)."""

from __future__ import annotations

from typing import cast

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import TeamApi, json_object
from api.errors import ApiError
from api.serializers import ErrorOutput
from core.bounds import MAX_COUNT
from executions.selectors import named_limit_usage
from executions.services.named_limits import named_limit_delete
from teams.models import ApiKey
from teams.services import named_limit_set


class NamedLimitOutput(serializers.Serializer):
    name = serializers.CharField()
    max = serializers.IntegerField(help_text="0: unlimited")
    in_use = serializers.IntegerField(help_text="slots held, across every workflow listing it")
    queued = serializers.IntegerField(help_text="executions queued waiting for it")
    scope = serializers.ChoiceField(choices=["team", "global"])
    units_in_use = serializers.IntegerField(help_text="units held by running steps listing it")
    waiting_steps = serializers.IntegerField(help_text="steps waiting for it")
    paused = serializers.BooleanField()


class LimitListApi(TeamApi):
    class LimitListOutput(serializers.Serializer):
        limits = NamedLimitOutput(many=True)

    @extend_schema(operation_id="list_limits", responses={200: LimitListOutput})
    def get(self, request: Request) -> Response:
        limits = named_limit_usage(teams=[self.team])
        return Response({"limits": NamedLimitOutput(limits, many=True).data})


class LimitSetApi(TeamApi):
    class LimitInput(serializers.Serializer):
        max = serializers.IntegerField(min_value=0, max_value=MAX_COUNT, help_text="0: unlimited")
        scope = serializers.ChoiceField(
            choices=["team", "global"], default="team", help_text="global: a staff user's key"
        )

    class LimitSetOutput(serializers.Serializer):
        name = serializers.CharField()
        max = serializers.IntegerField()
        scope = serializers.CharField()

    @extend_schema(
        operation_id="set_limit",
        request=LimitInput,
        responses={200: LimitSetOutput, 201: LimitSetOutput, 400: ErrorOutput, 403: ErrorOutput},
    )
    def put(self, request: Request, name: str) -> Response:
        given = self.LimitInput(data=json_object(request.body))
        given.is_valid(raise_exception=True)
        is_global = given.validated_data["scope"] == "global"
        if is_global and not cast(ApiKey, request.auth).is_staff:
            raise ApiError(
                403, "staff_only", "a global named limit is set with a staff user's key only"
            )
        try:
            limit, created = named_limit_set(
                team=None if is_global else self.team, name=name, max=given.validated_data["max"]
            )
        except ValidationError as exc:
            detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise ApiError(400, "invalid_limit", detail) from None
        return Response(
            self.LimitSetOutput(limit).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class LimitDeleteApi(TeamApi):
    @extend_schema(
        operation_id="delete_limit", responses={204: None, 404: ErrorOutput, 409: ErrorOutput}
    )
    def delete(self, request: Request, name: str) -> Response:
        if not named_limit_delete(team=self.team, name=name):
            raise ApiError(404, "limit_not_found", f"no named limit {name!r}")
        return Response(status=status.HTTP_204_NO_CONTENT)


class LimitApi(LimitSetApi, LimitDeleteApi):
    """`/api/v1/limits/<name>`: PUT and DELETE, each its own view, on one route."""
