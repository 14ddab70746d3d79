"""API-key authentication: `Authorization: Bearer mk_<64 hex>` → the key's team.

Only the SHA-256 of a key is stored, and a key is found by an indexed equality lookup of its
hash: the comparison never runs over the secret itself, so its timing says nothing about it.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from teams.models import ApiKey, Team

if TYPE_CHECKING:  # rest_framework.views imports this module through the settings
    from rest_framework.views import APIView

KEY_FORMAT = re.compile(r"mk_[0-9a-f]{64}")
# last_used_at is written at most once a minute per key: a busy key costs no write per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """request.user is the key's Team, request.auth the ApiKey."""

    def authenticate(self, request: Request) -> tuple[Team, ApiKey] | None:
        # From META: request.headers (DRF's get_authorization_header) builds a dict of every
        # header first, the costliest step of an authentication from api.resolved's cache.
        parts = request.META.get("HTTP_AUTHORIZATION", "").split()
        if not parts:
            return None
        if len(parts) != 2 or parts[0].lower() != "bearer":
            raise exceptions.AuthenticationFailed("expected 'Authorization: Bearer mk_…'")
        key = parts[1]
        if not KEY_FORMAT.fullmatch(key):
            raise exceptions.AuthenticationFailed("malformed API key")
        api_key = self.lookup(request, ApiKey.hash(key))
        if api_key is None:
            raise exceptions.AuthenticationFailed("unknown API key")
        if not api_key.is_active:
            raise exceptions.AuthenticationFailed("revoked API key")
        _touch(api_key)
        return api_key.team, api_key

    def lookup(self, request: Request, key_hash: str) -> ApiKey | None:
        """The key with its team (a view may fetch what it needs along with them)."""
        try:
            return ApiKey.objects.select_related("team").get(key_hash=key_hash)  # no ORDER BY
        except ApiKey.DoesNotExist:
            return None

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="mantle"'


def _touch(api_key: ApiKey) -> None:
    now = timezone.now()
    stale = now - LAST_USED_RESOLUTION
    if api_key.last_used_at is None or api_key.last_used_at < stale:
        ApiKey.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale)).filter(
            id=api_key.id
        ).update(last_used_at=now)
        # A key a web process keeps (api.resolved) is written again a minute later, not on
        # every request.
        api_key.last_used_at = now


class HasTeamKey(permissions.BasePermission):
    """Missing credentials are 401 (not 403): the authenticator names the Bearer scheme."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not isinstance(request.auth, ApiKey):
            raise exceptions.NotAuthenticated(
                "an API key is required: 'Authorization: Bearer mk_…'"
            )
        return True


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """The scheme in the OpenAPI schema (drf-spectacular finds it by subclassing)."""

    target_class = ApiKeyAuthentication
    name = "apiKey"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "mk_<64 hex>"}
