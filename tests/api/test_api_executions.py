"""Executions: list (filters, cursor pagination), detail with steps, cancel (CONTRACT §5)."""

from __future__ import annotations

import uuid

import pytest

from executions.models import Execution, Status, StepStatus
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from tests.factories import StepExecutionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def executions(team, make_workflow):
    """deploy (limit 1): one pending, two queued; build: one completed. Oldest first."""
    deploy = make_workflow(team, limit=1)
    build = make_workflow(team, "build")
    admitted = [execution_admit(team=team, workflow=deploy).execution for _ in range(3)]
    done = execution_admit(team=team, workflow=build).execution
    execution_finish(done.id, status=Status.COMPLETED)
    return [*admitted, done]


def ids(response) -> list[str]:
    return [e["id"] for e in response.json()["executions"]]


class TestList:
    def test_it_lists_newest_first_with_the_contract_fields(self, api, executions):
        response = api.get("/api/v1/executions")
        assert response.status_code == 200
        assert ids(response) == [str(e.id) for e in reversed(executions)]
        queued = response.json()["executions"][1]
        assert set(queued) >= {
            "id", "workflow", "version", "status", "inputs", "forced", "trigger", "created_at",
            "queued_at", "started_at", "completed_at", "queue_position", "blocked_by", "error",
        }  # fmt: skip
        assert (queued["status"], queued["queue_position"], queued["blocked_by"]) == (
            "queued",
            2,
            "workflow",
        )
        assert queued["created_at"].endswith("Z")

    def test_it_filters_by_workflow_and_status(self, api, executions):
        assert ids(api.get("/api/v1/executions?status=queued")) == [
            str(executions[2].id),
            str(executions[1].id),
        ]
        assert ids(api.get("/api/v1/executions?workflow=build")) == [str(executions[3].id)]
        assert ids(api.get("/api/v1/executions?workflow=build&status=queued")) == []
        assert ids(api.get("/api/v1/executions?workflow=nope")) == []

    def test_a_cursor_pages_through_everything_once(self, api, executions):
        seen, cursor = [], None
        for _ in range(10):
            query = "limit=1" + (f"&cursor={cursor}" if cursor else "")
            page = api.get(f"/api/v1/executions?{query}").json()
            seen += [e["id"] for e in page["executions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [str(e.id) for e in reversed(executions)]

    @pytest.mark.parametrize(
        "query",
        ["status=nope", "limit=0", "limit=201", "limit=x", "cursor=garbage", "statu=queued"],
    )
    def test_a_bad_filter_is_400(self, api, executions, query):
        response = api.get(f"/api/v1/executions?{query}")
        assert (response.status_code, response.json()["error"]) == (400, "invalid_filter")

    def test_another_teams_executions_are_not_listed(self, other_api, executions):
        assert api_ids(other_api) == []


def api_ids(client) -> list[str]:
    return ids(client.get("/api/v1/executions"))


class TestDetail:
    def test_it_has_the_steps(self, api, executions):
        execution = executions[0]
        StepExecutionFactory(
            execution=execution, name="only", status=StepStatus.COMPLETED, output={"ok": True}
        )
        body = api.get(f"/api/v1/executions/{execution.id}").json()
        assert body["id"] == str(execution.id)
        assert [(s["name"], s["status"], s["output"]) for s in body["steps"]] == [
            ("only", "completed", {"ok": True})
        ]

    def test_an_unknown_or_malformed_id_is_404_json(self, api, executions):
        for path in (f"/api/v1/executions/{uuid.uuid4()}", "/api/v1/executions/not-a-uuid"):
            response = api.get(path)
            assert response.status_code == 404
            assert response.json()["error"] in {"execution_not_found", "not_found"}

    def test_another_teams_execution_is_404(self, other_api, executions):
        response = other_api.get(f"/api/v1/executions/{executions[0].id}")
        assert (response.status_code, response.json()["error"]) == (404, "execution_not_found")


class TestCancel:
    def test_it_cancels_a_queued_or_pending_execution(self, api, executions):
        for execution in executions[:2]:
            response = api.post(f"/api/v1/executions/{execution.id}/cancel")
            assert response.status_code == 200
            assert response.json() == {"execution_id": str(execution.id), "status": "cancelled"}
            assert Execution.objects.get(id=execution.id).status == Status.CANCELLED

    def test_cancelling_a_slot_holder_promotes_the_queue(
        self, api, executions, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            api.post(f"/api/v1/executions/{executions[0].id}/cancel")
        assert Execution.objects.get(id=executions[1].id).status == Status.PENDING

    def test_a_terminal_execution_is_409(self, api, executions):
        response = api.post(f"/api/v1/executions/{executions[3].id}/cancel")
        assert response.status_code == 409
        assert response.json()["error"] == "not_cancellable"
        assert response.json()["status"] == "completed"

    def test_another_teams_execution_is_404_and_untouched(self, other_api, executions):
        response = other_api.post(f"/api/v1/executions/{executions[0].id}/cancel")
        assert response.status_code == 404
        assert Execution.objects.get(id=executions[0].id).status == Status.PENDING

    def test_get_is_405(self, api, executions):
        assert api.get(f"/api/v1/executions/{executions[0].id}/cancel").status_code == 405
