"""Hostile input through Django's test client: each answer is a JSON 4xx, never a 500, and
nothing is written."""

from __future__ import annotations

import base64
import uuid

import pytest

from executions.models import Execution

pytestmark = pytest.mark.django_db


def cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.fixture
def anonymous(client):
    client.raise_request_exception = False
    return client


@pytest.mark.parametrize(
    "body", [b'{"inputs": {"a": "\\ud800"}}', b'{"inputs": {"\\udfff": 1}}'], ids=["value", "key"]
)
def test_a_lone_surrogate_in_a_json_body_is_400(api, team, make_workflow, body) -> None:
    make_workflow(team)
    response = api.post("/api/v1/run/deploy", body, content_type="application/json")
    assert (response.status_code, response.json()["error"]) == (400, "invalid_json")
    assert "lone surrogates" in response.json()["detail"]
    assert not Execution.objects.exists()


def test_a_webhook_payload_with_a_lone_surrogate_is_kept_as_text(anonymous, team, make_hook):
    make_hook(team)
    response = anonymous.post("/hooks/deploy", b'{"a": "\\ud800"}', content_type="application/json")
    assert response.status_code == 202
    assert Execution.objects.get().trigger["payload"] == '{"a": "\\ud800"}'


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/api/v1/workflows/a%00b"),
        ("get", "/api/v1/executions?workflow=a%00b"),
        ("post", "/hooks/a%00b"),
    ],
)
def test_a_nul_in_the_url_is_400(api, method, url) -> None:
    api.raise_request_exception = False
    response = getattr(api, method)(url)
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_url",
        "detail": "the URL contains a NUL character (%00)",
    }


@pytest.mark.parametrize(
    "raw",
    [
        "0001-01-01T00:00:00+05:00|{id}",  # before year 1 in UTC
        "9999-12-31T23:59:59-14:00|{id}",  # after year 9999 in UTC
        "2026-01-01T00:00:00|{id}",  # no time zone
        "2026-13-01T00:00:00+00:00|{id}",
    ],
)
def test_a_cursor_out_of_range_is_400(api, raw) -> None:
    api.raise_request_exception = False
    token = cursor(raw.format(id=uuid.uuid4()))
    response = api.get(f"/api/v1/executions?cursor={token}")
    assert (response.status_code, response.json()["error"]) == (400, "invalid_filter")


def test_a_cursor_at_the_edge_of_the_range_is_a_valid_page(api) -> None:
    token = cursor(f"0001-01-01T00:00:00+00:00|{uuid.uuid4()}")
    response = api.get(f"/api/v1/executions?cursor={token}")
    assert (response.status_code, response.json()["executions"]) == (200, [])


def test_the_expression_that_crashes_the_cel_library_is_400(api) -> None:
    """50,000 chained additions (100 KB) segfaulted the web worker inside the CEL library."""
    chain = "1" + "+1" * 50_000
    step = f'  - name: a\n    action: test/echo\n    params: {{x: "{{{{ {chain} }}}}"}}\n'
    content = f"name: bomb\nsteps:\n{step}"
    response = api.put("/api/v1/workflows/bomb", content, content_type="application/yaml")
    assert (response.status_code, response.json()["error"]) == (400, "invalid_workflow")
    [error] = response.json()["errors"]
    assert "limits.expression_length" in error["message"]


@pytest.mark.parametrize(
    "params",
    ["{x: " + "[" * 2000 + "]" * 2000 + "}", '{x: "\\ud800"}', "{x: !custom [1]}"],
    ids=["deep", "surrogate", "tag"],
)
def test_a_hostile_yaml_document_is_400(api, params) -> None:
    """A RecursionError in PyYAML, then jsonb refusing the text: each was a 500."""
    body = f"name: w\nsteps:\n  - name: a\n    action: test/echo\n    params: {params}\n"
    response = api.put("/api/v1/workflows/w", body, content_type="application/yaml")
    assert (response.status_code, response.json()["error"]) == (400, "invalid_workflow")
    assert response.json()["errors"][0]["line"] == 5
