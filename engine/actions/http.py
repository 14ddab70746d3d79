"""`http/request` on httpx: params `method`, `url`, `headers`, `body` (a mapping or list is sent
as JSON, anything else as text), `timeout` (seconds or a duration, default 30s). Output `status`,
`headers`, `body`, `json` (null unless the body is JSON). A 4xx/5xx fails the step with the
output kept."""

from __future__ import annotations

import json
from typing import Any

import httpx

from core.durations import parse_duration
from engine.actions import ActionContext, ActionFailed

NAME = "http/request"
DEFAULT_TIMEOUT = 30.0


def run(params: dict[str, Any], context: ActionContext) -> dict[str, Any]:
    url = params.get("url")
    if not isinstance(url, str) or not url:
        raise ActionFailed("http/request needs a url")
    method = str(params.get("method", "GET")).upper()
    headers = {str(k): str(v) for k, v in (params.get("headers") or {}).items()}
    try:
        timeout = parse_duration(params.get("timeout", DEFAULT_TIMEOUT))
    except ValueError as exc:
        raise ActionFailed(f"timeout: {exc}") from None
    body = params.get("body")
    content = {}
    if isinstance(body, dict | list):
        content = {"json": body}
    elif body is not None:
        content = {"content": str(body).encode()}
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True) as client:
            response = client.request(method, url, headers=headers, **content)
    except httpx.TimeoutException:
        raise ActionFailed(f"{method} {url}: timed out after {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise ActionFailed(f"{method} {url}: connection failed: {exc}") from None
    output = {
        "status": response.status_code,
        "headers": dict(response.headers),
        "body": response.text,
        "json": _json(response),
    }
    if response.is_error:
        raise ActionFailed(
            f"{method} {url}: HTTP {response.status_code} {response.reason_phrase}", output=output
        )
    return output


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
