"""The middleware only a person's browser needs: the session, the logged-in user, messages and
framing, for the admin, the dashboard and login. The API (`/api/`, `/hooks/`) authenticates each
request by its key or its webhook's signature and answers JSON: its requests pass these by, which
was 7.5 % of the instructions of `POST /api/v1/run` (README, "Web workers"). CSRF stays for every
request (the API's views are exempt by DRF)."""

from __future__ import annotations

from collections.abc import Awaitable

from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.utils.deprecation import MiddlewareMixin

API_PATHS = ("/api/", "/hooks/")


class _BrowserOnly(MiddlewareMixin):
    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if request.path_info.startswith(API_PATHS):
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
