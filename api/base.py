"""What every view of the API shares: the team of the API key, JSON bodies that jsonb can store,
Idempotency-Key, and the answer to an admission (202, or 200 for an idempotent retry)."""

from __future__ import annotations

import json
import math
import re
from functools import cache
from typing import Any, cast

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.errors import ApiError
from api.serializers import AdmissionOutput, ConcurrencyLimitOutput, ErrorOutput
from executions.models import Status
from executions.services.admission import Admission
from teams.models import Team

IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII
IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="A retry with the same key returns the original execution (200).",
)


def idempotency_key(request: Request) -> str | None:
    key = request.META.get("HTTP_IDEMPOTENCY_KEY")  # not request.headers: see teams.auth
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise ApiError(400, "invalid_idempotency_key", "1 to 255 visible ASCII characters")
    return key


def admission_response(admission: Admission) -> Response:
    """202 for a new execution, 200 for the original one of an idempotent retry."""
    execution = admission.execution
    # AdmissionOutput's fields, written out: the hottest answer of the API skips a serializer.
    body = {
        "execution_id": str(execution.id),
        "workflow": execution.workflow.name,
        "version": execution.version.number,
        "status": admission.status,
        "queue_position": admission.queue_position,
        "blocked_by": admission.blocked_by,
        "blocked_by_name": admission.blocked_by_name,
        "concurrency_key": execution.concurrency_key or None,
        "priority": execution.priority,
    }
    if admission.warnings:
        body["warnings"] = list(admission.warnings)
    if admission.status == Status.SCHEDULED:  # only then: an admitted row defers run_at
        body["run_at"] = execution.run_at.isoformat() if execution.run_at else None
    return Response(
        body,
        status=status.HTTP_200_OK if admission.replayed else status.HTTP_202_ACCEPTED,
        headers={"Location": f"{executions_path()}/{execution.id}"},
    )


@cache
def executions_path() -> str:
    """`execution-list`'s path, of which an execution's is `/<id>`: reversed once per process
    (reverse() was 5 % of a request's Python in a profile of POST /api/v1/run)."""
    return reverse("execution-list")


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
        return cast(Team, self.request.user)


# Characters jsonb cannot store: NUL, and lone UTF-16 surrogates, which a JSON escape can
# spell (\ud800) but UTF-8 cannot encode.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def parse_json(raw: bytes) -> Any:
    """JSON that PostgreSQL's jsonb can store: ValueError also on NaN, infinite numbers,
    \\u0000 and lone surrogates, which jsonb refuses."""

    def reject(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    try:
        document = json.loads(raw, parse_constant=reject)
        storable = _storable(document)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not storable:
        raise ValueError("infinite numbers, \\u0000 and lone surrogates cannot be stored")
    return document


def _storable(value: Any) -> bool:
    if isinstance(value, str):
        return _UNSTORABLE.search(value) is None
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_storable(k) and _storable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable(item) for item in value)
    return True


def json_object(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        body = parse_json(raw)
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    return body
