"""Workflows, queues, health, metrics and the JSON error pages (docs/api.md)."""

from __future__ import annotations

import pytest
from django.db import connection
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from executions.services.admission import execution_admit
from tests.api.conftest import hook_yaml
from tests.factories import workflow_yaml
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db


def put(client, name, content):
    return client.put(f"/api/v1/workflows/{name}", content, content_type="application/yaml")


class TestApply:
    def test_it_is_201_new_then_200_unchanged_then_200_new_version(self, api, team):
        first = put(api, "deploy", workflow_yaml())
        assert (first.status_code, first.json()) == (
            201,
            {"name": "deploy", "version": 1, "changed": True, "warnings": []},
        )
        same = put(api, "deploy", workflow_yaml())
        assert (same.status_code, same.json()["version"], same.json()["changed"]) == (
            200,
            1,
            False,
        )
        assert put(api, "deploy", workflow_yaml(limit=2)).json()["version"] == 2

    def test_an_invalid_workflow_is_400_with_every_errors_path_and_message(self, api, team):
        content = (
            "name: deploy\nmax_parallel_executions: -1\nsteps:\n  - name: a\n    action: x/y\n"
        )
        response = put(api, "deploy", content)
        assert response.status_code == 400
        body = response.json()
        assert body["error"] == "invalid_workflow"
        paths = {error["path"] for error in body["errors"]}
        assert {"max_parallel_executions", "steps[0].action"} <= paths
        assert all(error["message"] for error in body["errors"])
        assert not WorkflowDefinition.objects.exists()

    def test_what_upstream_accepts_is_applied_with_its_warnings(self, api, team):
        content = (
            "name: deploy\nsteps:\n  - name: a\n    action: test/echo\n    max_parallel: 2\n"
            '    params: {who: "{{ inputs.customer }}", where: "{{ env.NOT_SET }}"}\n'
        )
        response = put(api, "deploy", content)
        assert response.status_code == 201
        assert response.json()["warnings"] == [
            {
                "path": "steps[0].max_parallel",
                "line": 5,
                "message": "is ignored: it bounds the branches of a for_each, and this step has"
                " none",
            },
            {
                "path": "steps[0].params.who",
                "line": 6,
                "message": 'expression "inputs.customer": undeclared input "customer" (accepted:'
                " inputs are an open map; declare it in inputs)",
            },
            {
                "path": "steps[0].params.where",
                "line": 6,
                "message": 'expression "env.NOT_SET": env "NOT_SET" is not set in this'
                " configuration (env: in mantle.yaml); a run that reads it fails",
            },
        ]
        assert WorkflowDefinition.objects.get(name="deploy").current_version.number == 1

    def test_the_name_must_match_the_path(self, api, team):
        response = put(api, "other", workflow_yaml("deploy"))
        assert response.json()["errors"][0]["path"] == "name"

    def test_yaml_that_does_not_parse_is_400(self, api, team):
        assert put(api, "deploy", "name: [oops").json()["error"] == "invalid_workflow"

    def test_the_same_name_in_two_teams_are_two_workflows(self, api, other_api, team):
        put(api, "deploy", workflow_yaml())
        assert put(other_api, "deploy", workflow_yaml(limit=3)).status_code == 201
        assert api.get("/api/v1/workflows/deploy").json()["max_parallel_executions"] == 0


class TestRead:
    def test_list_and_detail(self, api, team):
        put(api, "deploy", hook_yaml("deploy", "/hooks/deploy", limit=2, on_limit="reject"))
        listed = api.get("/api/v1/workflows").json()["workflows"]
        assert [
            (w["name"], w["version"], w["max_parallel_executions"], w["on_limit"]) for w in listed
        ] == [("deploy", 1, 2, "reject")]
        assert listed[0]["webhooks"] == ["/hooks/deploy"]
        detail = api.get("/api/v1/workflows/deploy").json()
        assert detail["content"].startswith("name: deploy")

    def test_the_detail_lists_the_steps_in_run_order_with_derived_dependencies(self, api, team):
        content = """
name: report
steps:
  - name: summary
    action: test/echo
    params: {user: "{{ steps['get-user'].output }}", orders: "{{ steps.orders.output }}"}
  - name: orders
    action: test/echo
    params: {id: "{{ steps['get-user'].output.id }}"}
  - name: get-user
    action: test/echo
    params: {id: 1}
  - name: audit
    action: test/noop
"""
        assert put(api, "report", content).status_code == 201
        steps = api.get("/api/v1/workflows/report").json()["steps"]
        assert [(step["name"], step["depends_on"]) for step in steps] == [
            ("get-user", []),
            ("orders", ["get-user"]),
            ("summary", ["orders", "get-user"]),
            ("audit", []),
        ]

    def test_another_teams_workflows_are_invisible(self, api, other_api, team):
        put(api, "deploy", workflow_yaml())
        assert other_api.get("/api/v1/workflows").json() == {"workflows": []}
        response = other_api.get("/api/v1/workflows/deploy")
        assert (response.status_code, response.json()["error"]) == (404, "workflow_not_found")


class TestQueues:
    def test_it_reports_the_teams_limit_running_and_queued_per_workflow(
        self, api, other_api, team, make_workflow
    ):
        deploy = make_workflow(team, limit=1)
        for _ in range(3):
            execution_admit(team=team, workflow=deploy)
        body = api.get("/api/v1/queues").json()
        assert (body["team"], body["limit"], body["running"], body["queued"]) == ("acme", 0, 1, 2)
        (workflow,) = body["workflows"]
        assert {k: workflow[k] for k in ("name", "max_parallel_executions", "on_limit")} == {
            "name": "deploy",
            "max_parallel_executions": 1,
            "on_limit": "queue",
        }
        assert (workflow["running"], workflow["queued"]) == (1, 2)
        assert workflow["oldest_queued_at"].endswith("Z")
        assert other_api.get("/api/v1/queues").json()["workflows"] == []


class TestErrorsAreJson:
    @pytest.mark.parametrize("path", ["/api/v1/nope", "/api/nope", "/hooks/"])
    def test_an_unknown_path_is_404_json(self, api, path):
        response = api.get(path)
        assert (response.status_code, response["Content-Type"]) == (404, "application/json")
        assert response.json()["error"] == "not_found"

    def test_a_wrong_method_is_405_json_with_allow(self, api):
        response = api.delete("/api/v1/queues")
        assert (response.status_code, response.json()["error"]) == (405, "method_not_allowed")
        assert "GET" in response["Allow"]

    def test_every_api_endpoint_is_401_without_a_key(self, team):
        client = APIClient()
        for method, path in [
            ("post", "/api/v1/run/deploy"),
            ("get", "/api/v1/executions"),
            ("get", "/api/v1/executions/00000000-0000-0000-0000-000000000000"),
            ("post", "/api/v1/executions/00000000-0000-0000-0000-000000000000/cancel"),
            ("get", "/api/v1/workflows"),
            ("get", "/api/v1/workflows/deploy"),
            ("put", "/api/v1/workflows/deploy"),
            ("get", "/api/v1/queues"),
        ]:
            response = getattr(client, method)(path)
            assert (response.status_code, response.json()["error"]) == (401, "not_authenticated")


class TestHealth:
    def test_healthz_and_readyz_are_200(self, client):
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200


@pytest.mark.django_db(transaction=True)
class TestDatabaseDown:
    @pytest.fixture
    def database_down(self):
        connection.close()
        port = connection.settings_dict["PORT"]
        connection.settings_dict["PORT"] = "1"
        yield
        connection.close()
        connection.settings_dict["PORT"] = port

    def test_readyz_and_the_api_are_503_database_unavailable(self, team, database_down):
        for path in ("/readyz", "/api/v1/queues"):
            headers = {"Authorization": "Bearer mk_" + "0" * 64}
            response = APIClient().get(path, headers=headers)
            assert response.status_code == 503
            assert response.json()["error"] == "database_unavailable"
        assert APIClient().get("/healthz").status_code == 200


class TestMetrics:
    def test_gauges_equal_the_database_at_scrape_time(self, client, team, make_workflow):
        make_workflow(team, "deploy")
        build = make_workflow(team, "build", limit=1)
        for _ in range(3):
            execution_admit(team=team, workflow=build)
        response = client.get("/metrics")
        assert response.status_code == 200
        text = response.content.decode()
        assert 'mantle_executions_queued{team="acme",workflow="build"} 2.0' in text
        assert 'mantle_executions_running{team="acme",workflow="build"} 1.0' in text
        assert 'mantle_executions_queued{team="acme",workflow="deploy"} 0.0' in text

    def test_a_rejection_is_counted_with_its_scope(self, api, client, team, make_workflow):
        make_workflow(team, limit=1, on_limit="reject")
        labels = {"team": "acme", "workflow": "deploy", "scope": "workflow"}
        before = REGISTRY.get_sample_value("mantle_executions_rejected_total", labels) or 0
        api.post("/api/v1/run/deploy")
        assert api.post("/api/v1/run/deploy").status_code == 429
        assert REGISTRY.get_sample_value("mantle_executions_rejected_total", labels) == before + 1
        text = client.get("/metrics").content.decode()
        for name in (
            "mantle_executions_total counter",
            "mantle_promotions_total counter",
            "mantle_queue_wait_duration_seconds histogram",
        ):
            assert f"# TYPE {name}" in text
