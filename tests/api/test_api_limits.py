"""Named limits over HTTP (docs/limits.md): list, set, delete, and the 202 / 429 of a run that one
of them blocks; a rate limit's 429 `rate_limited` with Retry-After."""

from __future__ import annotations

import pytest

from teams.models import NamedLimit
from teams.services import api_key_create
from tests.factories import workflow_yaml
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)


def test_put_creates_then_changes_a_limit_and_get_lists_its_use(api, team):
    created = api.put("/api/v1/limits/prod-db", {"max": 1}, format="json")
    assert (created.status_code, created.json()) == (
        201,
        {"name": "prod-db", "max": 1, "scope": "team"},
    )
    workflow_apply(team=team, content=workflow_yaml("a", extra="limits: [prod-db]\n"))
    admitted = api.post("/api/v1/run/a").json()
    queued = api.post("/api/v1/run/a").json()
    assert admitted["blocked_by"] is None
    assert (queued["status"], queued["blocked_by"], queued["blocked_by_name"]) == (
        "queued",
        "limit",
        "prod-db",
    )
    detail = api.get(f"/api/v1/executions/{queued['execution_id']}").json()
    assert (detail["blocked_by"], detail["blocked_by_name"]) == ("limit", "prod-db")
    assert api.get("/api/v1/limits").json() == {
        "limits": [
            {
                "name": "prod-db",
                "max": 1,
                "in_use": 1,
                "queued": 1,
                "scope": "team",
                "units_in_use": 0,
                "waiting_steps": 0,
                "paused": False,
            }
        ]
    }
    changed = api.put("/api/v1/limits/prod-db", {"max": 2}, format="json")
    assert (changed.status_code, changed.json()["max"]) == (200, 2)
    assert api.get("/api/v1/limits").json()["limits"][0]["in_use"] == 2


def test_a_rejecting_workflow_answers_429_with_scope_limit(api, team):
    api.put("/api/v1/limits/prod-db", {"max": 1}, format="json")
    workflow_apply(
        team=team, content=workflow_yaml("a", on_limit="reject", extra="limits: [prod-db]\n")
    )
    assert api.post("/api/v1/run/a").status_code == 202
    response = api.post("/api/v1/run/a")
    assert response.status_code == 429
    assert "Retry-After" not in response
    body = response.json()
    assert {k: body[k] for k in ("error", "scope", "limit", "name")} == {
        "error": "concurrency_limit",
        "scope": "limit",
        "limit": 1,
        "name": "prod-db",
    }


@pytest.mark.parametrize(
    ("body", "code"),
    [({"max": -1}, "invalid_request"), ({}, "invalid_request"), ("[1]", "invalid_json")],
)
def test_a_bad_body_is_400_and_writes_nothing(api, body, code):
    response = api.put("/api/v1/limits/prod-db", body, format="json")
    assert (response.status_code, response.json()["error"]) == (400, code)
    assert not NamedLimit.objects.exists()


def test_a_bad_name_is_400(api):
    response = api.put("/api/v1/limits/Prod_DB", {"max": 1}, format="json")
    assert (response.status_code, response.json()["error"]) == (400, "invalid_limit")


def test_delete_is_refused_while_in_use_then_allowed(api, team, other_api):
    api.put("/api/v1/limits/prod-db", {"max": 1}, format="json")
    workflow_apply(team=team, content=workflow_yaml("a", extra="limits: [prod-db]\n"))
    refused = api.delete("/api/v1/limits/prod-db")
    assert refused.status_code == 409
    assert refused.json()["error"] == "limit_in_use"
    assert refused.json()["workflows"] == ["a"]
    assert other_api.delete("/api/v1/limits/prod-db").status_code == 404
    workflow_apply(team=team, content=workflow_yaml("a"))
    assert api.delete("/api/v1/limits/prod-db").status_code == 204
    assert api.delete("/api/v1/limits/prod-db").json()["error"] == "limit_not_found"


def test_an_unknown_limit_in_a_put_workflow_is_400_at_its_path(api):
    content = workflow_yaml("a", extra="limits: [nope]\n")
    response = api.put("/api/v1/workflows/a", content, content_type="application/yaml")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "path": "limits[0]",
            "message": "unknown named limit 'nope' (mantle limits set <team> nope <N>)",
            "line": 4,
        }
    ]


def test_over_http_it_is_429_rate_limited_with_retry_after(api, team, make_workflow):
    extra = "rate_limit: {max: 1, period: 1m}\n"
    make_workflow(team, "rated", on_limit="reject", extra=extra)
    assert api.post("/api/v1/run/rated").status_code == 202
    response = api.post("/api/v1/run/rated")
    assert response.status_code == 429
    assert response.json()["error"] == "rate_limited"
    assert response.json()["scope"] == "rate"
    assert 59 <= int(response["Retry-After"]) <= 60


def test_a_global_limit_is_set_with_a_staff_users_key_only(api, team, django_user_model):
    refused = api.put("/api/v1/limits/prod-db", {"max": 3, "scope": "global"}, format="json")
    assert (refused.status_code, refused.json()["error"]) == (403, "staff_only")
    assert not NamedLimit.objects.exists()
    staff = django_user_model.objects.create_user("ops", is_staff=True)
    _, key = api_key_create(team=team, user=staff)
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    created = api.put("/api/v1/limits/prod-db", {"max": 3, "scope": "global"}, format="json")
    assert (created.status_code, created.json()) == (
        201,
        {"name": "prod-db", "max": 3, "scope": "global"},
    )
    assert NamedLimit.objects.get().team is None
    # Every team lists it, beside its own.
    api.put("/api/v1/limits/own", {"max": 1}, format="json")
    listed = api.get("/api/v1/limits").json()["limits"]
    assert [(lim["name"], lim["scope"], lim["max"]) for lim in listed] == [
        ("own", "team", 1),
        ("prod-db", "global", 3),
    ]
