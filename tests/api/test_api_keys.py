"""Concurrency keys over HTTP (docs/limits.md): the 202 body and the execution's JSON, 400 for a key
that cannot be evaluated, and 400 at apply time for a bad key (429 with the key's scope:
test_api_run's TestRejection)."""

from __future__ import annotations

import pytest

from executions.models import Execution
from tests.factories import workflow_yaml

pytestmark = pytest.mark.django_db

KEYED = 'inputs:\n  customer:\nconcurrency_key: "{{ inputs.customer }}"\nmax_parallel_per_key: 1\n'


def run(api, customer):
    return api.post("/api/v1/run/deploy", {"inputs": {"customer": customer}}, format="json")


def test_the_202_body_and_the_execution_name_the_key(api, team, make_workflow):
    make_workflow(team, extra=KEYED)
    first = run(api, "acme").json()
    assert (first["status"], first["concurrency_key"], first["blocked_by_name"]) == (
        "pending",
        "acme",
        None,
    )
    second = run(api, "acme").json()
    assert {
        k: second[k] for k in ("status", "queue_position", "blocked_by", "blocked_by_name")
    } == {
        "status": "queued",
        "queue_position": 1,
        "blocked_by": "key",
        "blocked_by_name": "acme",
    }
    detail = api.get(f"/api/v1/executions/{second['execution_id']}").json()
    assert (detail["concurrency_key"], detail["blocked_by"], detail["blocked_by_name"]) == (
        "acme",
        "key",
        "acme",
    )
    assert detail["queue_position"] == 1


def test_a_key_that_fails_at_admission_is_400_and_writes_nothing(api, team, make_workflow):
    make_workflow(team, extra=KEYED)
    response = run(api, {"nested": True})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_inputs"
    assert response.json()["detail"] == "concurrency_key: must give a non-empty string, got dict"
    assert not Execution.objects.exists()


GIVEN = 'inputs:\n  plan:\n  n:\nconcurrency_key: "{{ inputs.plan }}"\n' + (
    'max_parallel_per_key: "{{ inputs.n }}"\n'
)


@pytest.mark.parametrize(
    ("n", "shown"), [(0, "got 0"), (-2, "got -2"), ("3", "got '3'"), (1.5, "got 1.5")]
)
def test_a_bad_value_at_admission_is_400_and_writes_nothing(api, team, make_workflow, n, shown):
    make_workflow(team, extra=GIVEN)
    body = {"inputs": {"plan": "pro", "n": n}}
    response = api.post("/api/v1/run/deploy", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_inputs"
    detail = response.json()["detail"]
    assert detail.startswith("max_parallel_per_key: must be an integer from 1") and shown in detail
    assert not Execution.objects.exists()


def test_a_bad_key_expression_is_refused_at_apply_with_its_line(api):
    text = workflow_yaml(extra='concurrency_key: "{{ steps.a.output }}"\n')
    response = api.put("/api/v1/workflows/deploy", text, content_type="application/yaml")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "path": "concurrency_key",
            "message": 'expression "steps.a.output": "steps" is not in scope here'
            " (only inputs and trigger)",
            "line": 4,
        }
    ]


def test_a_key_reading_an_undeclared_input_is_applied_with_a_warning(api):
    text = workflow_yaml(extra='concurrency_key: "{{ inputs.nope }}"\n')
    response = api.put("/api/v1/workflows/deploy", text, content_type="application/yaml")
    assert response.status_code == 201
    assert response.json()["warnings"] == [
        {
            "path": "concurrency_key",
            "message": 'expression "inputs.nope": undeclared input "nope" (accepted: inputs are'
            " an open map; declare it in inputs)",
            "line": 4,
        }
    ]


def test_the_api_takes_a_priority(api, team, make_workflow):
    make_workflow(team)
    response = api.post("/api/v1/run/deploy", {"priority": 7}, format="json")
    assert response.status_code == 202
    assert response.json()["priority"] == 7
    detail = api.get(f"/api/v1/executions/{response.json()['execution_id']}").json()
    assert detail["priority"] == 7


@pytest.mark.parametrize("priority", [10, -1, "high"])
def test_a_bad_priority_is_400_and_writes_nothing(api, team, make_workflow, priority):
    make_workflow(team)
    response = api.post("/api/v1/run/deploy", {"priority": priority}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_inputs"
    assert response.json()["detail"].startswith("priority: ")
    assert not Execution.objects.exists()


def test_a_full_queue_is_429_queue_full(api, team, make_workflow):
    make_workflow(team, limit=1, extra="max_queued: 1\n")
    assert [api.post("/api/v1/run/deploy").status_code for _ in range(2)] == [202, 202]
    response = api.post("/api/v1/run/deploy")
    assert response.status_code == 429
    assert response.json() == {
        "error": "queue_full",
        "detail": "the queue is full (1 queued, max_queued)",
        "scope": "queue_full",
        "limit": 1,
    }
    assert Execution.objects.count() == 2


def test_the_queues_list_each_workflows_busiest_keys(api, team, make_workflow):
    make_workflow(team, extra=KEYED)
    for customer in ["a", "a", "b", "b", "b", "c"]:
        run(api, customer)
    (workflow,) = api.get("/api/v1/queues").json()["workflows"]
    assert workflow["max_parallel_per_key"] == 1
    keys = [
        {k: v for k, v in key.items() if k != "oldest_queued_at"}
        for key in workflow["busiest_keys"]
    ]
    assert keys == [
        {"key": "b", "running": 1, "queued": 2},
        {"key": "a", "running": 1, "queued": 1},
        {"key": "c", "running": 1, "queued": 0},
    ]
    assert workflow["busiest_keys"][2]["oldest_queued_at"] is None
