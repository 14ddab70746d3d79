"""`http/request` on httpx: params `method`, `url`, `headers`, `body` (a mapping or list is sent
as JSON, anything else as text), `timeout` (seconds or a duration, default 30s). Output `status`,
`headers`, `body`, `json` (null unless the body is JSON). A 4xx/5xx fails the step with the
output kept. Every hop, redirects included, goes only where the egress policy allows
(engine/egress.py), and a body over `engine.http.max_response_bytes` fails the step."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from django.conf import settings

from core.bounds import duration_problem
from core.durations import parse_duration
from engine.actions import ActionContext, ActionFailed
from engine.egress import (
    MAX_REDIRECTS,
    EgressRefused,
    Unresolvable,
    destination_resolve,
    redirect_next,
)

NAME = "http/request"
DEFAULT_TIMEOUT = 30.0


async def run(params: dict[str, Any], context: ActionContext) -> dict[str, Any]:
    url = params.get("url")
    if not isinstance(url, str) or not url:
        raise ActionFailed("http/request needs a url")
    method = str(params.get("method", "GET")).upper()
    headers = {str(k): str(v) for k, v in (params.get("headers") or {}).items()}
    try:
        timeout = parse_duration(params.get("timeout", DEFAULT_TIMEOUT))
    except ValueError as exc:
        raise ActionFailed(f"timeout: {exc}", retryable=False) from None
    if problem := duration_problem(timeout):
        raise ActionFailed(f"timeout: {problem}", retryable=False)
    body = params.get("body")
    content: dict[str, Any] = {}
    if isinstance(body, dict | list):
        content = {"json": body}
    elif body is not None:
        content = {"content": str(body).encode()}
    try:
        response, text = await _send(
            context.http, method, httpx.URL(url), headers, {**content, "timeout": timeout}
        )
    except httpx.InvalidURL as exc:
        raise ActionFailed(f"{url!r} is not a valid URL: {exc}") from None
    except EgressRefused as exc:
        raise ActionFailed(f"{method} {url}: refused: {exc}", retryable=False) from None
    except Unresolvable as exc:
        raise ActionFailed(f"{method} {url}: {exc}") from None
    except httpx.TimeoutException:
        raise ActionFailed(f"{method} {url}: timed out after {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise ActionFailed(f"{method} {url}: connection failed: {exc}") from None
    output = {
        "status": response.status_code,
        "headers": dict(response.headers),
        "body": text,
        "json": _json(text),
    }
    if response.is_error:
        raise ActionFailed(
            f"{method} {url}: HTTP {response.status_code} {response.reason_phrase}", output=output
        )
    return output


async def _send(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    headers: dict[str, str],
    content: dict[str, Any],
) -> tuple[httpx.Response, str]:
    policy = settings.MANTLE.engine.http
    for _hop in range(MAX_REDIRECTS + 1):
        destination = await asyncio.to_thread(destination_resolve, url, policy)
        request = client.build_request(
            method,
            destination.url,
            headers={**_without(headers, "host"), **destination.headers},
            extensions=destination.extensions,
            **content,
        )
        response = await client.send(request, stream=True)
        try:
            hop = redirect_next(response, url, method)
            if hop is None:
                return response, await _read(response, policy.max_response_bytes)
        finally:
            await response.aclose()
        if hop[0].host != url.host:
            headers = _without(headers, "authorization")
        url, next_method = hop
        if next_method != method:
            method, content = next_method, {"timeout": content["timeout"]}
    raise ActionFailed(f"{url}: more than {MAX_REDIRECTS} redirects")


def _without(headers: dict[str, str], name: str) -> dict[str, str]:
    return {key: value for key, value in headers.items() if key.lower() != name}


async def _read(response: httpx.Response, limit: int) -> str:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise ActionFailed(
                f"the response body exceeds engine.http.max_response_bytes ({limit} bytes)"
            )
    return body.decode(response.encoding or "utf-8", errors="replace")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
