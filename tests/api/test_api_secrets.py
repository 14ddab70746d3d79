"""Secrets stay secret: webhook secrets are not shown back, credentials in webhook headers are
not stored, and an anonymous webhook caller has an Idempotency-Key space of its own."""

from __future__ import annotations

import pytest
import yaml
from django.urls import reverse
from rest_framework.test import APIClient

from executions.models import Execution
from mantle_site.config import EngineConfig
from tests.factories import SIGNED_WORKFLOW
from workflows.models import WorkflowDefinition
from workflows.redaction import content_redacted

pytestmark = pytest.mark.django_db


def test_get_workflow_and_the_admin_show_no_webhook_secret(api, admin_client):
    put = api.put("/api/v1/workflows/signed", SIGNED_WORKFLOW, content_type="application/yaml")
    assert put.status_code == 201
    shown = api.get("/api/v1/workflows/signed").json()["content"]
    version = WorkflowDefinition.objects.get().current_version
    page = admin_client.get(reverse("admin:workflows_workflowversion_change", args=[version.id]))
    for text in (shown, page.content.decode()):
        for secret in ("a quoted: secret", "a-block-secret", "a-plain-secret"):
            assert secret not in text
        assert text.count("[redacted]") == 3
    assert yaml.safe_load(shown)["triggers"][2] == {
        "type": "webhook",
        "path": "/hooks/plain",
        "secret": "[redacted]",
    }


def test_an_anchored_secret_is_redacted_where_it_is_written():
    text = "a: &s !!str 'the-secret'\ntriggers:\n  - secret: *s\n  - {secret: x, path: /p}\n"
    assert content_redacted(text) == (
        "a: &s !!str '[redacted]'\ntriggers:\n  - secret: *s\n"
        "  - {secret: '[redacted]', path: /p}\n"
    )


def test_credential_headers_are_not_stored(client, team, make_hook, mantle_config):
    make_hook(team)
    credentials = {
        "Authorization": "Bearer a",
        "Proxy-Authorization": "Basic b",
        "Cookie": "session=c",
        "X-Api-Key": "d",
        "X-Gitlab-Token": "e",
        "X-Auth-Token": "f",
        "X-Hub-Signature": "sha1=g",
        "X-Hub-Signature-256": "sha256=h",
        "X-Signature-256": "sha256=i",
    }
    client.post(
        "/hooks/deploy",
        b"{}",
        content_type="application/json",
        headers={**credentials, "X-GitHub-Event": "push"},
    )
    headers = Execution.objects.get().trigger["headers"]
    assert headers["x-github-event"] == "push"
    assert not {name.lower() for name in credentials} & set(headers)
    mantle_config("engine", redact_headers=("x-github-*",))
    client.post(
        "/hooks/deploy",
        b"{}",
        content_type="application/json",
        headers={"X-GitHub-Event": "push", "X-Api-Key": "d"},
    )
    latest = Execution.objects.order_by("-created_at").first().trigger["headers"]
    assert ("x-github-event" in latest, latest.get("x-api-key")) == (False, "d")


def test_the_defaults_name_the_documented_headers():
    assert {"authorization", "cookie", "x-api-key", "x-*-token", "x-hub-signature*"} <= set(
        EngineConfig().redact_headers
    )


def test_a_webhook_caller_cannot_replay_an_api_clients_idempotency_key(
    api, team, make_hook, make_workflow
):
    make_hook(team, "hooked", "/hooks/hooked")
    make_hook(team, "other", "/hooks/other")
    make_workflow(team, "deploy")
    by_api = api.post("/api/v1/run/deploy", {}, format="json", headers={"Idempotency-Key": "k1"})
    anonymous = APIClient()
    first = anonymous.post("/hooks/hooked", {}, format="json", headers={"Idempotency-Key": "k1"})
    again = anonymous.post("/hooks/hooked", {}, format="json", headers={"Idempotency-Key": "k1"})
    other = anonymous.post("/hooks/other", {}, format="json", headers={"Idempotency-Key": "k1"})
    assert (by_api.status_code, first.status_code, again.status_code, other.status_code) == (
        202,
        202,
        200,
        202,
    )
    ids = [r.json()["execution_id"] for r in (by_api, first, again, other)]
    assert ids[1] == ids[2]
    assert len(set(ids)) == 3
    assert Execution.objects.count() == 3
