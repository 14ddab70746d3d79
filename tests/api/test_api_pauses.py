"""Pause and resume over HTTP (docs/api.md, Pause and resume): the three targets, the 202 of a
held run and the 429 `paused` of `on_pause: reject`, the paused state in GET /api/v1/queues and
GET /api/v1/limits, the gauge, and the 404s of another team's or an unknown target."""

from __future__ import annotations

import pytest

from executions.models import Execution
from teams.services import named_limit_set
from tests.factories import workflow_yaml
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_paused_workflow_holds_runs_and_its_resume_promotes_them(api, team):
    workflow_apply(team=team, content=workflow_yaml("deploy"))
    paused = api.post("/api/v1/workflows/deploy/pause")
    assert paused.status_code == 200
    body = paused.json()
    assert (body["paused"], body["changed"], body["cancelled"]) == (True, True, 0)
    assert body["paused_at"] is not None
    held = api.post("/api/v1/run/deploy")
    assert held.status_code == 202
    assert (held.json()["status"], held.json()["blocked_by"]) == ("queued", "paused")
    queues = api.get("/api/v1/queues").json()
    assert queues["paused"] is False
    assert (queues["workflows"][0]["paused"], queues["workflows"][0]["paused_by"]) == (
        True,
        "workflow",
    )
    again = api.post("/api/v1/workflows/deploy/pause").json()
    assert again["changed"] is False
    resumed = api.post("/api/v1/workflows/deploy/resume").json()
    assert (resumed["paused"], resumed["paused_at"], resumed["promoted"]) == (False, None, 1)
    assert Execution.objects.get().status == "pending"
    assert api.get("/api/v1/queues").json()["workflows"][0]["paused"] is False


def test_on_pause_reject_answers_429_paused(api, team):
    workflow_apply(team=team, content=workflow_yaml("deploy", extra="on_pause: reject\n"))
    api.post("/api/v1/teams/acme/pause")
    rejected = api.post("/api/v1/run/deploy")
    assert rejected.status_code == 429
    assert (rejected.json()["error"], rejected.json()["scope"]) == ("paused", "paused")
    assert "Retry-After" not in rejected
    assert api.get("/api/v1/queues").json()["paused"] is True
    assert not Execution.objects.exists()


def test_a_paused_limit_shows_in_the_limits_and_the_gauge(api, team, client):
    named_limit_set(team=team, name="prod-db", max=2)
    workflow_apply(team=team, content=workflow_yaml("deploy", extra="limits: [prod-db]\n"))
    workflow_apply(team=team, content=workflow_yaml("other"))
    assert api.post("/api/v1/limits/prod-db/pause").json()["paused"] is True
    held = api.post("/api/v1/run/deploy").json()
    assert (held["blocked_by"], held["blocked_by_name"]) == ("paused", "prod-db")
    assert api.get("/api/v1/limits").json()["limits"][0]["paused"] is True
    scrape = client.get("/metrics").content.decode()
    assert 'mantle_paused{team="acme",workflow="deploy"} 1.0' in scrape
    assert 'mantle_paused{team="acme",workflow="other"} 0.0' in scrape
    assert api.post("/api/v1/limits/prod-db/resume").json()["promoted"] == 1


def test_the_pause_can_cancel_what_runs_and_resume_cannot(api, team):
    workflow_apply(team=team, content=workflow_yaml("deploy"))
    running = api.post("/api/v1/run/deploy").json()["execution_id"]
    body = {"cancel_running": True}
    assert api.post("/api/v1/workflows/deploy/pause", body, format="json").json()["cancelled"] == 1
    assert Execution.objects.get(id=running).status == "cancelled"
    refused = api.post("/api/v1/workflows/deploy/resume", body, format="json")
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_request")
    bad = api.post("/api/v1/workflows/deploy/pause", {"cancel_running": "maybe"}, format="json")
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_request")


def test_unknown_or_foreign_targets_are_404(api, other_api, team):
    workflow_apply(team=team, content=workflow_yaml("deploy"))
    assert other_api.post("/api/v1/workflows/deploy/pause").json()["error"] == "workflow_not_found"
    assert other_api.post("/api/v1/teams/acme/pause").json()["error"] == "team_not_found"
    assert api.post("/api/v1/limits/nope/pause").json()["error"] == "limit_not_found"
    not_an_object = api.post(
        "/api/v1/workflows/deploy/pause", b"[1]", content_type="application/json"
    )
    assert (not_an_object.status_code, not_an_object.json()["error"]) == (400, "invalid_json")
    assert api.get("/api/v1/queues").json()["workflows"][0]["paused"] is False
