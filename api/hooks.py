"""`POST /hooks/<path>`: a webhook trigger admits an execution of its workflow.

The path alone names the workflow (paths are unique across teams, see workflows.services). The
caller is authenticated by default (docs/hostile-input.md, Webhook authentication): a trigger
with a `secret` requires `X-Hub-Signature-256: sha256=<hex>` (or upstream Mantle's
`X-Signature-256`), the HMAC-SHA256 of the raw body, hex in either case; one without requires
an API key of the workflow's team (`Authorization: Bearer`), 401 otherwise; only `auth: none`
admits anyone. Over 1 MiB is 413 before the body is read (JsonErrorMiddleware).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from fnmatch import translate
from functools import lru_cache
from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.base import ADMISSION_RESPONSES, IDEMPOTENCY_HEADER, admission_response, parse_json
from api.base import idempotency_key as idempotency_key_of
from api.errors import ApiError
from api.resolved import BEFORE_ADMISSION, HOOKS
from executions.resolution import webhook_by_path
from executions.services.admission import Resolved
from executions.services.idempotency import execution_admit_once
from teams.auth import ApiKeyAuthentication
from workflows.models import WebhookPath

SIGNATURE_HEADER = "X-Hub-Signature-256"
SIGNATURE_ALIAS = "X-Signature-256"  # upstream Mantle's name for the same header


class WebhookApi(APIView):
    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="webhook",
        request={"application/json": OpenApiTypes.OBJECT, "text/plain": OpenApiTypes.STR},
        parameters=[
            IDEMPOTENCY_HEADER,
            OpenApiParameter(SIGNATURE_HEADER, str, OpenApiParameter.HEADER),
        ],
        responses={
            **ADMISSION_RESPONSES,
            401: ADMISSION_RESPONSES[400],
            403: ADMISSION_RESPONSES[400],
        },
    )
    def post(self, request: Request, hook: str) -> Response:
        path = f"/hooks/{hook}"
        cached = HOOKS.get(path)
        if cached is not None:
            try:
                return self.admit(request, cached, resolved=Resolved(hook_path=path))
            except BEFORE_ADMISSION:
                pass
        # Not cached, or nothing admitted from the cached hook: answer as the tables say (404 for
        # a path gone since, a new version's secret or inputs).
        hook_row = webhook_by_path(path=path)
        if hook_row is None:
            HOOKS.forget(path)
            raise ApiError(404, "hook_not_found", f"no webhook at {path}")
        HOOKS.put(path, hook_row)
        return self.admit(request, hook_row, resolved=None)

    def admit(self, request: Request, hook: WebhookPath, *, resolved: Resolved | None) -> Response:
        workflow, secret = hook.workflow, hook.secret
        body = request.body
        signature = request.headers.get(SIGNATURE_HEADER, request.headers.get(SIGNATURE_ALIAS))
        if secret is not None and not _signed(body, secret, signature):
            raise ApiError(403, "bad_signature", f"{SIGNATURE_HEADER} does not match the body")
        if secret is None and not hook.anonymous:
            _authenticate(request, hook)
        admission = execution_admit_once(
            team=workflow.team,
            workflow=workflow,
            inputs=None,
            trigger={
                "type": "webhook",
                "path": hook.path,
                "payload": _payload(body),
                "headers": _stored_headers(request),
            },
            idempotency_key=webhook_idempotency_key(hook.path, idempotency_key_of(request)),
            resolved=resolved,
        )
        return admission_response(admission)


def _authenticate(request: Request, hook: WebhookPath) -> None:
    """An API key of the workflow's team; another team's key is as good as none."""
    try:
        found = ApiKeyAuthentication().authenticate(request)
    except AuthenticationFailed as exc:
        raise ApiError(401, "not_authenticated", str(exc.detail)) from None
    if found is None or found[0].id != hook.workflow.team_id:
        raise ApiError(
            401,
            "not_authenticated",
            f"{hook.path} needs an API key of its team (Authorization: Bearer mk_…) "
            "or a signed body",
        )


def _stored_headers(request: Request) -> dict[str, str]:
    """The headers a workflow may read: credentials of the caller are not its business, and
    the trigger is stored and shown (engine.redact_headers)."""
    redacted = _redaction(settings.MANTLE.engine.redact_headers)
    return {
        name: value
        for name, value in ((n.lower(), v) for n, v in request.headers.items())
        if not redacted.match(name)
    }


@lru_cache(maxsize=8)
def _redaction(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """The patterns (fnmatch's, case-sensitive) as one compiled expression."""
    return re.compile("|".join(translate(pattern) for pattern in patterns) or "(?!)")


def webhook_idempotency_key(path: str, key: str | None) -> str | None:
    """An anonymous caller's key lives in this hook's own key space: it can neither replay an
    execution that an API client or another hook started nor learn that one exists."""
    if key is None:
        return None
    return "webhook:" + hashlib.sha256(f"{path} {key}".encode()).hexdigest()


def _signed(body: bytes, secret: str, header: str | None) -> bool:
    if header is None or not header.strip().startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    given = header.strip().removeprefix("sha256=").lower()
    return hmac.compare_digest(expected.encode(), given.encode())


def _payload(body: bytes) -> Any:
    """The JSON document, else the text (undecodable bytes replaced); None when empty."""
    if not body:
        return None
    try:
        return parse_json(body)
    except ValueError:
        # jsonb stores no NUL character, even inside a string.
        return body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
