"""The middleware only a person's browser needs: the session, the logged-in user, messages and
framing, for the admin, the dashboard and login. The machines' paths (api.errors.JSON_PREFIXES:
the API, webhooks, health and metrics) authenticate each request by its key or its webhook's
signature, or not at all, and answer JSON or text: their requests pass these by, which was 7.5 %
of the instructions of `POST /api/v1/run` (README, "Web workers"). CSRF stays for every request
(the API's views are exempt by DRF)."""

from __future__ import annotations

from collections.abc import Awaitable

from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.utils.deprecation import MiddlewareMixin

from api.errors import JSON_PREFIXES


class _BrowserOnly(MiddlewareMixin):
    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if request.path_info.startswith(JSON_PREFIXES):
            return self.get_response(request)
        return super().__call__(request)


class BrowserSessionMiddleware(_BrowserOnly, SessionMiddleware):
    pass


class BrowserAuthenticationMiddleware(_BrowserOnly, AuthenticationMiddleware):
    pass


class BrowserMessageMiddleware(_BrowserOnly, MessageMiddleware):
    pass


class BrowserXFrameOptionsMiddleware(_BrowserOnly, XFrameOptionsMiddleware):
    pass
