"""Executions: list (filters, cursor pagination), detail with steps, the steps a page at a time,
cancel (docs/api.md)."""

from __future__ import annotations

import uuid

import pytest

from executions.models import Execution, Status, StepStatus
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from tests.factories import ExecutionFactory, StepExecutionFactory, fanout_branches

pytestmark = pytest.mark.django_db


@pytest.fixture
def executions(team, make_workflow, django_capture_on_commit_callbacks):
    """deploy (limit 1): one pending, two queued; build: one completed. Oldest first. (The
    completion's after-commit work runs, as its commit would run it: the test's transaction
    never commits.)"""
    deploy = make_workflow(team, limit=1)
    build = make_workflow(team, "build")
    admitted = [execution_admit(team=team, workflow=deploy).execution for _ in range(3)]
    done = execution_admit(team=team, workflow=build).execution
    with django_capture_on_commit_callbacks(execute=True):
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


BRANCHES = 10_000
OUTPUT = {"status": 200, "body": "x" * 200}


@pytest.fixture
def fanout(team, make_workflow):
    """A running execution of 10,000 branches (limits.fanout_items), each with an output of
    200 bytes: 4 MB as one JSON answer (with 2 KB outputs, 21.5 MB)."""
    execution = ExecutionFactory(workflow=make_workflow(team), status=Status.RUNNING)
    fanout_branches(execution, BRANCHES, name="each", status=StepStatus.COMPLETED, output=OUTPUT)
    StepExecutionFactory(execution=execution, name="each", status=StepStatus.RUNNING)  # parent
    return execution


class TestFanoutDetail:
    def test_the_detail_has_the_counts_and_the_first_steps_only(
        self, api, fanout, django_assert_max_num_queries
    ):
        with django_assert_max_num_queries(6):
            response = api.get(f"/api/v1/executions/{fanout.id}")
        assert response.status_code == 200
        assert len(response.content) < 40_000  # 50 steps of 400 bytes
        body = response.json()
        assert body["step_counts"] == {"completed": BRANCHES, "running": 1}
        assert [s["fanout_index"] for s in body["steps"]] == list(range(50))
        cursor = body["steps_next_cursor"]
        page = api.get(f"/api/v1/executions/{fanout.id}/steps?cursor={cursor}&limit=2").json()
        assert [s["fanout_index"] for s in page["steps"]] == [50, 51]

    def test_the_steps_page_through_every_step_once_and_filter(self, api, fanout):
        url = f"/api/v1/executions/{fanout.id}/steps?limit=200"
        seen, cursor, pages = [], None, 0
        while True:
            response = api.get(url + (f"&cursor={cursor}" if cursor else ""))
            assert response.status_code == 200
            assert len(response.content) < 120_000  # 200 steps of 400 bytes
            page = response.json()
            seen += [(s["fanout_index"], s["status"]) for s in page["steps"]]
            cursor, pages = page["next_cursor"], pages + 1
            if cursor is None:
                break
        assert seen == [(i, "completed") for i in range(BRANCHES)] + [(None, "running")]
        assert pages == BRANCHES // 200 + 1

        page = api.get(f"/api/v1/executions/{fanout.id}/steps?status=running").json()
        assert [(s["name"], s["fanout_index"]) for s in page["steps"]] == [("each", None)]
        assert page["next_cursor"] is None


class TestSteps:
    @pytest.mark.parametrize(
        "query",
        ["limit=0", "limit=201", "status=nope", "cursor=garbage", "cursor=LTE", "page=2",
         "cursor=OTIyMzM3MjAzNjg1NDc3NTgwOA"],  # -1; 2**63
    )  # fmt: skip
    def test_a_bad_filter_is_400(self, api, executions, query):
        response = api.get(f"/api/v1/executions/{executions[0].id}/steps?{query}")
        assert (response.status_code, response.json()["error"]) == (400, "invalid_filter")

    def test_another_teams_execution_is_404(self, other_api, executions):
        response = other_api.get(f"/api/v1/executions/{executions[0].id}/steps")
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
