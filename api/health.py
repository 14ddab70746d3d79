"""Probes and the Prometheus scrape: no API key, no team."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.errors import database_unavailable_body
from api.serializers import ErrorOutput
from executions import metrics, selectors


class HealthzApi(APIView):
    """Liveness: the process answers. No database access."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(operation_id="healthz", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


class ReadyzApi(HealthzApi):
    """Readiness: the database answers and takes writes (a server turned standby by a failover
    does not: docs/operations.md, Database failover)."""

    @extend_schema(operation_id="readyz", responses={200: OpenApiTypes.OBJECT, 503: ErrorOutput})
    def get(self, request: Request) -> Response:
        if selectors.database_read_only():
            connection.close()  # the next request finds the primary (target_session_attrs)
            return Response(database_unavailable_body(), status=503)
        return Response({"status": "ok", "database": "ok"})


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format (not an APIView: no content negotiation, no auth)."""
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)
