"""The browser's middleware (session, logged-in user, messages, framing) runs for the pages a
person opens, and the API's requests pass it by."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.api.conftest import client_of, hook, hook_yaml
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db


def test_the_admin_and_the_dashboard_have_the_browsers_middleware(admin_client: Client) -> None:
    for path in ("/admin/", "/"):
        answer = admin_client.get(path)
        assert answer.status_code == 200
        assert answer["X-Frame-Options"] == "DENY"
        assert answer.wsgi_request.user.is_superuser
        assert answer.wsgi_request.session.session_key


def test_the_apis_requests_pass_it_by(team, make_workflow) -> None:
    make_workflow(team)
    workflow_apply(team=team, content=hook_yaml("deploy-hook", "/hooks/deploy"))
    answers = [
        client_of(team).post("/api/v1/run/deploy", {}, format="json"),
        client_of(team).get("/api/v1/executions"),
        hook("/hooks/deploy"),
        client_of(team).get("/healthz"),
        client_of(team).get("/metrics"),
    ]
    for answer in answers:
        assert answer.status_code in (200, 202), answer.content
        assert "X-Frame-Options" not in answer
        assert not hasattr(answer.wsgi_request, "session")
        assert not hasattr(answer.wsgi_request, "_messages")
