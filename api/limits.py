"""Named limits (CONTRACT §9): `GET /api/v1/limits`, `PUT /api/v1/limits/<name>` `{"max": N}`,
`DELETE /api/v1/limits/<name>` (409 `limit_in_use` while a workflow or an execution uses it)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import TeamApi, json_object
from api.errors import ApiError
from api.serializers import ErrorOutput
from executions.selectors import named_limit_usage
from executions.services.named_limits import named_limit_delete
from teams.services import named_limit_set


class NamedLimitOutput(serializers.Serializer):
    name = serializers.CharField()
    max = serializers.IntegerField(help_text="0: unlimited")
    in_use = serializers.IntegerField(help_text="slots held, across every workflow listing it")
    queued = serializers.IntegerField(help_text="executions queued waiting for it")
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
        max = serializers.IntegerField(min_value=0, help_text="0: unlimited")

    class LimitSetOutput(serializers.Serializer):
        name = serializers.CharField()
        max = serializers.IntegerField()

    @extend_schema(
        operation_id="set_limit",
        request=LimitInput,
        responses={200: LimitSetOutput, 201: LimitSetOutput, 400: ErrorOutput},
    )
    def put(self, request: Request, name: str) -> Response:
        given = self.LimitInput(data=json_object(request.body))
        given.is_valid(raise_exception=True)
        try:
            limit, created = named_limit_set(
                team=self.team, name=name, max=given.validated_data["max"]
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
