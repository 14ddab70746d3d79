"""Named rates of steps (docs/limits.md, Step scope): `PUT /api/v1/rates/<name>`
`{"max": N, "period": "1s", "per_key": false}` (`"scope": "global"` with a staff user's key)."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import TeamApi, json_object
from api.errors import ApiError
from api.serializers import ErrorOutput
from core.bounds import MAX_COUNT, duration_argument
from teams.models import ApiKey
from teams.services import named_rate_set


class RateSetApi(TeamApi):
    class RateInput(serializers.Serializer):
        max = serializers.IntegerField(min_value=1, max_value=MAX_COUNT)
        period = serializers.CharField(help_text='a duration: "1s", "1m"')
        per_key = serializers.BooleanField(default=False)
        scope = serializers.ChoiceField(
            choices=["team", "global"], default="team", help_text="global: a staff user's key"
        )

    class RateSetOutput(serializers.Serializer):
        name = serializers.CharField()
        max = serializers.IntegerField()
        period_seconds = serializers.FloatField()
        per_key = serializers.BooleanField()
        scope = serializers.CharField()

    @extend_schema(
        operation_id="set_rate",
        request=RateInput,
        responses={200: RateSetOutput, 201: RateSetOutput, 400: ErrorOutput, 403: ErrorOutput},
    )
    def put(self, request: Request, name: str) -> Response:
        given = self.RateInput(data=json_object(request.body))
        given.is_valid(raise_exception=True)
        data = given.validated_data
        is_global = data["scope"] == "global"
        if is_global and not cast(ApiKey, request.auth).is_staff:
            raise ApiError(
                403, "staff_only", "a global named rate is set with a staff user's key only"
            )
        try:
            period = timedelta(seconds=duration_argument(data["period"]))
            rate, created = named_rate_set(
                team=None if is_global else self.team,
                name=name,
                max=data["max"],
                period=period,
                per_key=data["per_key"],
            )
        except ValueError as exc:
            raise ApiError(400, "invalid_rate", f"period: {exc}") from None
        except ValidationError as exc:
            detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise ApiError(400, "invalid_rate", detail) from None
        body = {
            "name": rate.name,
            "max": rate.max,
            "period_seconds": rate.period.total_seconds(),
            "per_key": rate.per_key,
            "scope": rate.scope,
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
