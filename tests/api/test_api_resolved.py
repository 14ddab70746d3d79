"""The request path in one round trip (api.resolved): once a web process has resolved an API key
and a workflow, or a hook path, it admits the next request in one statement, which checks that
what it resolved still holds; when it does not, nothing is admitted and the tables decide the
answer."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from executions.models import Execution
from teams.models import ApiKey
from teams.services import api_key_revoke
from tests.api.conftest import hook, hook_yaml
from tests.factories import workflow_yaml
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db


def statements(request) -> list[str]:  # type: ignore[no-untyped-def]
    """What a request sent to PostgreSQL, without the savepoint the test's transaction adds."""
    with CaptureQueriesContext(connection) as captured:
        assert request().status_code == 202
    return [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]


def run(client: APIClient, body: object = None, **headers: str):  # type: ignore[no-untyped-def]
    return client.post("/api/v1/run/deploy", body or {}, format="json", headers=headers)


class TestRun:
    def test_a_resolved_key_and_workflow_admit_in_one_statement(self, api, team, make_workflow):
        make_workflow(team)
        run(api)  # resolved from the tables
        assert len(statements(lambda: run(api, **{"Idempotency-Key": "once"}))) == 1

    def test_a_key_revoked_after_it_was_resolved_is_401_and_admits_nothing(
        self, api, team, make_workflow
    ):
        make_workflow(team)
        run(api)
        api_key_revoke(api_key=ApiKey.objects.get(team=team))
        response = run(api)
        assert (response.status_code, response.json()["detail"]) == (401, "revoked API key")
        assert Execution.objects.count() == 1

    def test_a_revoked_key_with_a_bad_body_is_still_401(self, api, team, make_workflow):
        make_workflow(team)
        run(api)
        api_key_revoke(api_key=ApiKey.objects.get(team=team))
        assert run(api, {"inputs": 3}).status_code == 401

    def test_a_version_applied_after_it_was_resolved_is_the_one_that_runs(
        self, api, team, make_workflow
    ):
        make_workflow(team)
        run(api)
        workflow_apply(team=team, content=workflow_yaml(limit=2))  # v1 holds one
        assert [run(api).json()["status"] for _ in range(2)] == ["pending", "queued"]
        assert Execution.objects.filter(version__number=2).count() == 2

    def test_a_retry_under_its_idempotency_key_is_the_original(self, api, team, make_workflow):
        make_workflow(team)
        first = run(api, **{"Idempotency-Key": "retry"})
        again = run(api, **{"Idempotency-Key": "retry"})
        assert (first.status_code, again.status_code) == (202, 200)
        assert again.json()["execution_id"] == first.json()["execution_id"]
        assert Execution.objects.count() == 1


class TestHooks:
    def test_a_resolved_hook_admits_in_one_statement(self, team, make_hook):
        make_hook(team)
        hook()
        assert len(statements(hook)) == 1

    def test_a_secret_applied_after_it_was_resolved_is_the_one_checked(self, team, make_hook):
        make_hook(team, secret="old")
        assert hook(secret="old").status_code == 202
        workflow_apply(team=team, content=hook_yaml("deploy", "/hooks/deploy", secret="new"))
        assert hook(secret="old").status_code == 403
        assert hook(secret="new").status_code == 202
        assert Execution.objects.count() == 2

    def test_a_path_moved_after_it_was_resolved_admits_its_new_workflow(self, team, make_hook):
        make_hook(team, "first", "/hooks/moving")
        assert hook("/hooks/moving").json()["workflow"] == "first"
        workflow_apply(team=team, content=hook_yaml("first", "/hooks/elsewhere"))
        assert hook("/hooks/moving").status_code == 404
        make_hook(team, "second", "/hooks/moving")
        assert hook("/hooks/moving").json()["workflow"] == "second"
