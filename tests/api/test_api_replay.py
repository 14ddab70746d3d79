"""Replay over the API and the CLI without workers (docs/api.md, Replay): through admission (a
full workflow queues the replay, a paused one holds it, `on_limit: reject` answers 429), the
body's errors, from_failed_step's refusals, another team's execution, and `mantle replay`."""

from __future__ import annotations

import pytest

from executions.models import Execution, StepExecution
from tests.commands import exit_code, run
from tests.factories import ExecutionFactory, StepExecutionFactory, workflow_yaml
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)


def failed(team, limit=0, on_limit="queue"):
    workflow = workflow_apply(
        team=team, content=workflow_yaml("deploy", limit=limit, on_limit=on_limit)
    ).workflow
    return ExecutionFactory(workflow=workflow, status="failed", inputs={}, trigger={"type": "api"})


def test_a_replay_waits_for_the_workflows_limit_like_any_run(api, team):
    original = failed(team, limit=1)
    ExecutionFactory(workflow=original.workflow, status="running")
    replayed = api.post(f"/api/v1/executions/{original.id}/replay")
    assert replayed.status_code == 202
    body = replayed.json()
    assert (body["status"], body["blocked_by"], body["replay_of"]) == (
        "queued",
        "workflow",
        str(original.id),
    )
    replay = Execution.objects.get(id=body["execution_id"])
    assert (replay.replay_of_id, replay.trigger, replay.version_id) == (
        original.id,
        {"type": "api"},
        original.version_id,
    )
    listed = api.get("/api/v1/executions?status=failed").json()["executions"]
    assert listed[0]["replays"] == [body["execution_id"]]


def test_a_full_rejecting_workflow_refuses_the_replay_and_writes_nothing(api, team):
    original = failed(team, limit=1, on_limit="reject")
    ExecutionFactory(workflow=original.workflow, status="running")
    refused = api.post(f"/api/v1/executions/{original.id}/replay")
    assert (refused.status_code, refused.json()["error"]) == (429, "concurrency_limit")
    assert not Execution.objects.filter(replay_of=original).exists()


def test_a_paused_workflow_holds_the_replay(api, team):
    original = failed(team)
    api.post("/api/v1/workflows/deploy/pause")
    body = api.post(f"/api/v1/executions/{original.id}/replay").json()
    assert (body["status"], body["blocked_by"]) == ("queued", "paused")


def test_bad_bodies_and_refusals_are_4xx_with_nothing_written(api, other_api, team):
    original = failed(team)
    path = f"/api/v1/executions/{original.id}/replay"
    for body, code in (
        ({"version": "v2"}, "invalid_request"),
        ({"from": "middle"}, "invalid_request"),
        ({"force": True}, "invalid_request"),
    ):
        answer = api.post(path, body, format="json")
        assert (answer.status_code, answer.json()["error"]) == (400, code)
    assert other_api.post(path).json()["error"] == "execution_not_found"
    completed = ExecutionFactory(workflow=original.workflow, status="completed")
    resumed = api.post(
        f"/api/v1/executions/{completed.id}/replay", {"from": "failed_step"}, format="json"
    )
    assert (resumed.status_code, resumed.json()["error"]) == (409, "not_resumable")
    assert Execution.objects.filter(replay_of__isnull=False).count() == 0


def test_mantle_replay_from_the_failed_step_copies_the_completed_steps(team):
    original = failed(team)
    StepExecutionFactory(execution=original, name="only", status="completed", output={"a": 1})
    out = run("mantle_replay", str(original.id)[:8], "--from-failed-step")
    replay_id = out.split()[0]
    assert f"replay of {original.id} (version 1, 1 completed steps reused)" in out
    copied = StepExecution.objects.get(execution_id=replay_id)
    assert (copied.status, copied.output) == ("completed", {"a": 1})
    completed = ExecutionFactory(workflow=original.workflow, status="completed")
    assert exit_code("mantle_replay", str(completed.id), "--from-failed-step") == 1
    assert exit_code("mantle_replay", "ffffffff") == 2
