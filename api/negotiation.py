"""Content negotiation: most clients of the API send no Accept header, `*/*` or
`application/json`, which the view's first renderer (JSON for the API) answers as DRF's
negotiation would, without parsing the header; any other Accept, or a `?format=`, is negotiated
by DRF."""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class JsonFirstNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderers = list(renderers)
        first = renderers[0]
        accept = request.META.get("HTTP_ACCEPT", "*/*")
        if (
            not format_suffix
            and self.settings.URL_FORMAT_OVERRIDE not in request.query_params
            and accept in ("*/*", first.media_type)
        ):
            return first, first.media_type
        return super().select_renderer(request, renderers, format_suffix)
