"""`POST /api/v1/run/<workflow>` (docs/api.md)."""

from __future__ import annotations

import pytest

from api.serializers import AdmissionOutput
from executions.models import Execution, Status
from teams.services import team_set_limit
from tests.api.conftest import client_of
from tests.factories import KEYED, workflow_yaml
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db

INPUTS = "inputs:\n  env:\n    type: string\n  replicas:\n    type: number\n    default: 1\n"


def run(client, workflow="deploy", body=None, **headers):
    return client.post(f"/api/v1/run/{workflow}", body, format="json", headers=headers)


class TestAdmission:
    def test_it_admits_as_pending_with_the_contract_body(self, api, team, make_workflow):
        make_workflow(team, extra=INPUTS)
        response = run(api, body={"inputs": {"env": "prod"}})
        assert response.status_code == 202
        execution = Execution.objects.get()
        assert response.json() == {
            "execution_id": str(execution.id),
            "workflow": "deploy",
            "version": 1,
            "status": "pending",
            "queue_position": None,
            "blocked_by": None,
            "blocked_by_name": None,
            "concurrency_key": None,
            "priority": 0,
        }
        assert response["Location"] == f"/api/v1/executions/{execution.id}"
        assert execution.inputs == {"env": "prod", "replicas": 1}
        assert execution.trigger == {"type": "api"}

    def test_the_body_has_the_documented_fields(self, api, team, make_workflow):
        make_workflow(team)
        documented = set(AdmissionOutput().fields)
        assert set(run(api).json()) == documented - {"warnings"}  # only when there are some
        assert set(run(api, body={"inputs": {"undeclared": 1}}).json()) == documented

    def test_it_queues_when_full_with_position_and_blocker(self, api, team, make_workflow):
        make_workflow(team, limit=1)
        assert run(api).json()["status"] == "pending"
        second, third = run(api).json(), run(api).json()
        assert (second["status"], second["queue_position"], second["blocked_by"]) == (
            "queued",
            1,
            "workflow",
        )
        assert third["queue_position"] == 2

    def test_a_full_team_blocks_with_scope_team(self, api, team, make_workflow):
        team_set_limit(team=team, max_concurrent_executions=1)
        make_workflow(team, "a")
        make_workflow(team, "b")
        run(api, "a")
        assert run(api, "b").json()["blocked_by"] == "team"

    def test_a_body_is_optional(self, api, team, make_workflow):
        make_workflow(team)
        assert api.post("/api/v1/run/deploy").status_code == 202


class TestRejection:
    @pytest.mark.parametrize(
        ("scope", "limit", "extra", "body"),
        [
            ("workflow", 1, "", None),
            ("key", 0, f"{KEYED}max_parallel_per_key: 1\n", {"inputs": {"customer": "acme"}}),
        ],
    )
    def test_it_rejects_with_429_scope_and_limit_and_writes_nothing(
        self, api, team, make_workflow, scope, limit, extra, body
    ):
        make_workflow(team, limit=limit, on_limit="reject", extra=extra)
        run(api, body=body)
        response = run(api, body=body)
        assert response.status_code == 429
        assert response.json() == {
            "error": "concurrency_limit",
            "detail": f"{scope} concurrency limit of 1 reached",
            "scope": scope,
            "limit": 1,
        }
        assert "Retry-After" not in response
        assert Execution.objects.count() == 1

    def test_the_team_scope_is_named_when_the_team_is_full(self, api, team, make_workflow):
        team_set_limit(team=team, max_concurrent_executions=2)
        make_workflow(team, "a")
        make_workflow(team, "b", on_limit="reject", limit=5)
        run(api, "a")
        run(api, "a")
        response = run(api, "b")
        assert (response.status_code, response.json()["scope"], response.json()["limit"]) == (
            429,
            "team",
            2,
        )


class TestBadRequests:
    def test_invalid_json_is_400(self, api, team, make_workflow):
        make_workflow(team)
        response = api.post("/api/v1/run/deploy", b"{nope", content_type="application/json")
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_json"

    @pytest.mark.parametrize("body", [b"[1]", b"3", b'"x"'])
    def test_a_body_that_is_not_an_object_is_400(self, api, team, make_workflow, body):
        make_workflow(team)
        response = api.post("/api/v1/run/deploy", body, content_type="application/json")
        assert response.json()["error"] == "invalid_json"

    @pytest.mark.parametrize(
        "body, message",
        [
            ({"inputs": {"env": 3}}, "inputs.env: must be a string"),
            ({"inputs": {"replicas": 1}}, "inputs.env: is required"),
            ({"inputs": [1]}, "'inputs' must be an object"),
            ({"input": {"env": "x"}}, "unknown keys ['input']"),
        ],
    )
    def test_inputs_that_do_not_match_are_400(self, api, team, make_workflow, body, message):
        make_workflow(team, extra=INPUTS)
        response = run(api, body=body)
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_inputs"
        assert message in response.json()["detail"]
        assert not Execution.objects.exists()

    def test_an_undeclared_input_is_kept_as_upstream_keeps_it(self, api, team, make_workflow):
        make_workflow(team, extra=INPUTS)
        response = run(api, body={"inputs": {"env": "x", "nope": {"a": 1}}})
        assert response.status_code == 202
        assert response.json()["warnings"] == [
            "inputs.nope: undeclared input (accepted: inputs are an open map)"
        ]
        assert "warnings" not in run(api, body={"inputs": {"env": "x"}}).json()
        execution = Execution.objects.get(id=response.json()["execution_id"])
        assert execution.inputs == {"env": "x", "nope": {"a": 1}, "replicas": 1}

    def test_nan_and_nul_characters_are_400_not_500(self, api, team, make_workflow):
        make_workflow(team, extra=INPUTS)
        for raw in (b'{"inputs": {"replicas": NaN}}', b'{"inputs": {"env": "a\\u0000"}}'):
            response = api.post("/api/v1/run/deploy", raw, content_type="application/json")
            assert (response.status_code, response.json()["error"]) == (400, "invalid_json")

    def test_an_unknown_workflow_is_404(self, api, team):
        response = run(api, "nope")
        assert (response.status_code, response.json()["error"]) == (404, "workflow_not_found")

    def test_a_body_over_1_mib_is_413(self, api, team, make_workflow):
        make_workflow(team)
        raw = b'{"inputs": {"x": "' + b"a" * (1024 * 1024) + b'"}}'
        response = api.post("/api/v1/run/deploy", raw, content_type="application/json")
        assert (response.status_code, response.json()["error"]) == (413, "payload_too_large")

    def test_get_is_405_in_json(self, api, team, make_workflow):
        make_workflow(team)
        response = api.get("/api/v1/run/deploy")
        assert (response.status_code, response.json()["error"]) == (405, "method_not_allowed")


class TestIdempotency:
    def test_a_retry_returns_the_original_with_200_and_admits_nothing(
        self, api, team, make_workflow
    ):
        make_workflow(team, limit=1)
        run(api)
        first = run(api, **{"Idempotency-Key": "abc"})
        again = run(api, **{"Idempotency-Key": "abc"})
        assert (first.status_code, again.status_code) == (202, 200)
        assert again.json() == first.json()
        assert again["Location"] == first["Location"]
        assert Execution.objects.count() == 2

    def test_a_retry_of_a_rejected_workflow_still_finds_the_original(
        self, api, team, make_workflow
    ):
        make_workflow(team, limit=1, on_limit="reject")
        first = run(api, **{"Idempotency-Key": "k"})
        assert run(api, **{"Idempotency-Key": "k"}).json() == first.json()

    def test_keys_are_per_team(self, api, other_api, team, other_team, make_workflow):
        make_workflow(team)
        make_workflow(other_team)
        run(api, **{"Idempotency-Key": "same"})
        assert run(other_api, **{"Idempotency-Key": "same"}).status_code == 202
        assert Execution.objects.count() == 2

    def test_a_key_used_for_another_workflow_is_409(self, api, team, make_workflow):
        make_workflow(team, "a")
        make_workflow(team, "b")
        run(api, "a", **{"Idempotency-Key": "k"})
        response = run(api, "b", **{"Idempotency-Key": "k"})
        assert (response.status_code, response.json()["error"]) == (409, "idempotency_key_reused")

    def test_a_malformed_key_is_400(self, api, team, make_workflow):
        make_workflow(team)
        response = run(api, **{"Idempotency-Key": "x" * 256})
        assert response.json()["error"] == "invalid_idempotency_key"


class TestIsolation:
    def test_another_teams_workflow_cannot_be_run(self, other_api, team, make_workflow):
        make_workflow(team)
        response = run(other_api)
        assert (response.status_code, response.json()["error"]) == (404, "workflow_not_found")
        assert not Execution.objects.exists()

    def test_same_names_in_two_teams_run_their_own(self, api, other_api, team, other_team):
        workflow_apply(team=team, content=workflow_yaml(limit=1))
        workflow_apply(team=other_team, content=workflow_yaml(limit=1))
        run(api)
        assert run(other_api).json()["status"] == "pending"
        assert Execution.objects.filter(team=other_team, status=Status.PENDING).count() == 1

    def test_a_key_of_one_team_is_not_another(self, other_team):
        assert client_of(other_team).get("/api/v1/queues").json()["team"] == "globex"
