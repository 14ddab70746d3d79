"""JSON errors for the API and the webhooks: `{"error": <code>, "detail": <message>, …}`.

Three places produce errors and all three end here: DRF views (the exception handler, which also
translates the services' exceptions), Django itself before or around a view (404 for an unknown
URL, 500; turned into JSON by the middleware), and a database that is down or too busy (503 from
either).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, InternalError, OperationalError, connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from psycopg import errors as pg_errors
from rest_framework import exceptions
from rest_framework.response import Response

from core import locks
from executions.services.admission import PAUSED, QUEUE_FULL, RATE, ConcurrencyLimitExceeded
from executions.services.idempotency import IdempotencyKeyReused
from executions.services.lifecycle import ExecutionBusy, NotCancellable
from executions.services.named_limits import NamedLimitInUse
from executions.services.replay import NotResumable, VersionChanged
from workflows.schema import InvalidInputs, WorkflowInvalid

logger = logging.getLogger(__name__)

# The machines' paths: errors as JSON here, and no browser middleware (mantle_site.middleware).
JSON_PREFIXES = ("/api/", "/hooks/", "/healthz", "/readyz", "/metrics")
DATABASE_ERRORS = (OperationalError, InterfaceError)
# A busy database (executions.locks.is_busy: a lock wait past lock_timeout) is up, but this
# team's work is contended: 503 `busy`, distinct from an unreachable database.
BUSY_RETRY_AFTER = "1"


class ApiError(exceptions.APIException):
    """An error with a machine code, a human message and optional extra fields."""

    def __init__(
        self,
        status_code: int,
        code: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        self.status_code = status_code
        self.code = code
        self.headers = headers or {}
        self.extra = extra
        super().__init__(detail=detail, code=code)


class PayloadTooLarge(ApiError):
    def __init__(self) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        super().__init__(413, "payload_too_large", f"the request body exceeds {limit} bytes")


_DRF_CODES = {
    exceptions.ParseError: "invalid_json",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.Throttled: "throttled",
    exceptions.ValidationError: "invalid_request",
}


def error_body(code: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail, **extra}


def _translate(exc: Exception) -> ApiError | None:
    """The services' exceptions as API errors."""
    if isinstance(exc, ConcurrencyLimitExceeded):
        codes = {QUEUE_FULL: QUEUE_FULL, RATE: "rate_limited", PAUSED: PAUSED}
        code = codes.get(exc.scope, "concurrency_limit")
        named = {} if exc.name is None else {"name": exc.name}
        # Over a rate the wait is known (unlike a slot's): Retry-After says it.
        headers = {} if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}
        return ApiError(
            429, code, str(exc), headers=headers, scope=exc.scope, limit=exc.limit, **named
        )
    if isinstance(exc, NamedLimitInUse):
        return ApiError(
            409, "limit_in_use", str(exc), workflows=exc.workflows, executions=exc.executions
        )
    if isinstance(exc, InvalidInputs):
        return ApiError(400, "invalid_inputs", str(exc), errors=exc.errors)
    if isinstance(exc, WorkflowInvalid):
        errors = [{"path": e.path, "message": e.message, "line": e.line} for e in exc.errors]
        detail = f"{len(errors)} error(s) in the workflow"
        return ApiError(400, "invalid_workflow", detail, errors=errors)
    if isinstance(exc, NotCancellable):
        return ApiError(409, "not_cancellable", str(exc), status=exc.status)
    if isinstance(exc, ExecutionBusy):
        return ApiError(503, "busy", str(exc))
    if isinstance(exc, VersionChanged):
        return ApiError(409, "version_changed", str(exc), steps=exc.names)
    if isinstance(exc, NotResumable):
        return ApiError(409, "not_resumable", str(exc), status=exc.status)
    if isinstance(exc, IdempotencyKeyReused):
        return ApiError(409, "idempotency_key_reused", str(exc))
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    return None


def database_unavailable_body() -> dict[str, Any]:
    return error_body("database_unavailable", "the database is unreachable; retry later")


def is_database_error(exc: Exception) -> bool:
    """Unreachable, busy, or reached on a server that no longer takes writes: a standby after
    a failover, behind a pooler or a name still pointing at the old primary."""
    return isinstance(exc, DATABASE_ERRORS) or _read_only(exc)


def _read_only(exc: Exception) -> bool:
    return isinstance(exc, InternalError) and isinstance(
        exc.__cause__, pg_errors.ReadOnlySqlTransaction
    )


def _database_error(exc: Exception) -> tuple[dict[str, Any], dict[str, str]]:
    """(body, headers) of the 503 for a database error: busy, or unreachable."""
    if _read_only(exc):
        # The next request connects anew, and libpq's target_session_attrs=read-write finds the
        # primary (docs/operations.md, Database failover).
        connection.close()
    if locks.is_busy(exc):
        logger.warning("database busy: %s", exc)
        detail = "too many concurrent requests for this team; retry later"
        return error_body("busy", detail), {"Retry-After": BUSY_RETRY_AFTER}
    logger.warning("database unavailable: %s", exc)
    return database_unavailable_body(), {}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]."""
    if is_database_error(exc):
        body, headers = _database_error(exc)
        return Response(body, status=503, headers=headers)
    # Django's own, as DRF's default handler maps them (an unknown `?format=` raises Http404).
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    exc = _translate(exc) or exc
    if not isinstance(exc, exceptions.APIException):
        return None  # a bug: Django's 500, turned into JSON by the middleware
    if isinstance(exc, ApiError):
        body = error_body(exc.code, str(exc.detail), **exc.extra)
    else:
        code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "error")
        body = error_body(code, _message(exc.detail))
        if isinstance(exc, exceptions.ValidationError):
            body["errors"] = exc.detail
    headers = dict(exc.headers) if isinstance(exc, ApiError) else {}
    if auth_header := getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = auth_header
    return Response(body, status=exc.status_code, headers=headers)


def _message(detail: Any) -> str:
    if isinstance(detail, list):
        return "; ".join(_message(item) for item in detail)
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_message(value)}" for key, value in detail.items())
    return str(detail)


class JsonErrorMiddleware:
    """Under the JSON prefixes: no HTML error page, ever; a body over the upload limit is 413
    before anything reads it; a database that is down is 503 `database_unavailable`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        is_json = request.path.startswith(JSON_PREFIXES)
        if is_json and _content_length(request) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            exc = PayloadTooLarge()
            return JsonResponse(error_body(exc.code, str(exc.detail)), status=413)
        if is_json and _has_nul(request):
            detail = "the URL contains a NUL character (%00)"
            return JsonResponse(error_body("invalid_url", detail), status=400)
        response = self.get_response(request)
        if is_json and response.status_code >= 400 and not _is_json(response):
            return _as_json(response)
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if is_database_error(exc):
            body, headers = _database_error(exc)
            return JsonResponse(body, status=503, headers=headers)
        if request.path.startswith(JSON_PREFIXES):
            logger.exception("unhandled error on %s", request.path, exc_info=exc)
            return JsonResponse(error_body("internal_error", "internal server error"), status=500)
        return None


def _has_nul(request: HttpRequest) -> bool:
    # PostgreSQL text cannot hold NUL: a %00 in a name or a filter would fail in the query.
    return "\x00" in request.path or "%00" in request.META.get("QUERY_STRING", "")


def _content_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _is_json(response: HttpResponse) -> bool:
    return response.get("Content-Type", "").startswith("application/json")


_GENERIC_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    500: "internal_error",
    503: "service_unavailable",
}


def _as_json(response: HttpResponse) -> JsonResponse:
    code = response.status_code
    try:
        phrase = HTTPStatus(code).phrase.lower()
    except ValueError:
        phrase = "error"
    generic = _GENERIC_CODES.get(code, phrase.replace(" ", "_"))
    json_response = JsonResponse(error_body(generic, phrase), status=code)
    if "Allow" in response:
        json_response["Allow"] = response["Allow"]
    return json_response
