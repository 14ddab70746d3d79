"""Bulk actions over the API and the CLI (docs/api.md, Bulk actions): each filter, dry runs
whose counts are exactly what the action then handles, the progress polled by id while the
batches run (the engine clock's bulk_advance, here called one batch at a time), and the
refusals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from executions.models import BulkAction, Execution
from executions.services import bulk
from tests.commands import exit_code, run
from tests.factories import KEYED, ExecutionFactory, workflow_yaml
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def executions(team):
    """deploy: 60 failed (key a: 20, b: 40), 10 completed, 5 pending; other: 7 failed, 3 running.
    The first 30 failed of deploy are an hour old."""
    deploy = workflow_apply(team=team, content=workflow_yaml("deploy", extra=KEYED)).workflow
    other = workflow_apply(team=team, content=workflow_yaml("other")).workflow
    old = timezone.now() - timedelta(hours=1)
    for n in range(60):
        ExecutionFactory(
            workflow=deploy,
            status="failed",
            concurrency_key="a" if n % 3 == 0 else "b",
            created_at=old if n < 30 else timezone.now(),
            inputs={"customer": "a" if n % 3 == 0 else "b"},
        )
    for status, count in (("completed", 10), ("pending", 5)):
        for _ in range(count):
            ExecutionFactory(workflow=deploy, status=status)
    for status, count in (("failed", 7), ("running", 3)):
        for _ in range(count):
            ExecutionFactory(workflow=other, status=status)
    return old


def dry(api, action, body):
    answer = api.post(f"/api/v1/executions/{action}", {**body, "dry_run": True}, format="json")
    assert answer.status_code == 200, answer.json()
    return answer.json()["matched"]


def test_dry_runs_count_exactly_what_each_filter_matches(api, executions):
    since = (executions + timedelta(minutes=1)).isoformat()
    assert dry(api, "replay", {}) == 85
    assert dry(api, "replay", {"filter": {"status": "failed"}}) == 67
    assert dry(api, "replay", {"filter": {"workflow": "deploy", "status": "failed"}}) == 60
    assert dry(api, "replay", {"filter": {"workflow": "deploy", "concurrency_key": "a"}}) == 20
    assert dry(api, "replay", {"filter": {"workflow": "deploy", "created_after": since}}) == 45
    assert dry(api, "replay", {"filter": {"status": "failed", "created_before": since}}) == 30
    assert dry(api, "replay", {"filter": {"status": "failed"}, "limit": 7}) == 7
    # A cancel matches live executions only.
    assert dry(api, "cancel", {}) == 8
    assert dry(api, "cancel", {"filter": {"workflow": "other"}}) == 3
    assert not BulkAction.objects.exists()


def test_a_bulk_replay_reports_its_progress_batch_by_batch(api, executions, monkeypatch):
    monkeypatch.setattr(bulk, "REPLAY_BATCH", 25)
    body = {"filter": {"workflow": "deploy", "status": "failed"}, "version": "latest"}
    matched = dry(api, "replay", body)
    made = api.post("/api/v1/executions/replay", body, format="json")
    assert made.status_code == 202
    bulk_id = made.json()["bulk_id"]
    assert made.headers["Location"] == f"/api/v1/bulk/{bulk_id}"
    progress = [api.get(f"/api/v1/bulk/{bulk_id}").json()]
    while progress[-1]["status"] == "running":
        bulk._batch(progress[-1]["bulk_id"])
        progress.append(api.get(f"/api/v1/bulk/{bulk_id}").json())
    assert [(p["done"], p["status"]) for p in progress] == [
        (0, "running"),
        (25, "running"),
        (50, "running"),
        (60, "completed"),
    ]
    assert progress[-1]["matched"] == matched == 60
    assert progress[-1]["failed"] == 0
    assert Execution.objects.filter(replay_of__isnull=False).count() == 60
    # The replays are not matched again: only the originals are failed.
    assert dry(api, "replay", body) == 60


def test_a_bulk_cancel_goes_through_the_normal_cancel(api, executions):
    made = api.post("/api/v1/executions/cancel", {"filter": {"workflow": "other"}}, format="json")
    bulk._batch(made.json()["bulk_id"])
    done = api.get(f"/api/v1/bulk/{made.json()['bulk_id']}").json()
    assert (done["matched"], done["done"], done["failed"], done["status"]) == (3, 3, 0, "completed")
    cancelled = Execution.objects.filter(workflow__name="other", status="cancelled")
    assert cancelled.count() == 3
    assert {e.error for e in cancelled} == {f"cancelled by bulk action {done['bulk_id']}"}


def test_bad_bulk_requests_are_4xx_and_make_nothing(api, other_api, executions):
    for action, body, code in (
        ("cancel", {"filter": {"colour": "red"}}, "invalid_filter"),
        ("cancel", {"filter": {"status": "completed"}}, "invalid_filter"),
        ("cancel", {"filter": {"status": "sleeping"}}, "invalid_filter"),
        ("cancel", {"filter": {"created_after": "yesterday"}}, "invalid_filter"),
        ("cancel", {"filter": []}, "invalid_filter"),
        ("cancel", {"limit": 0}, "invalid_request"),
        ("cancel", {"limit": True}, "invalid_request"),
        ("cancel", {"version": "latest"}, "invalid_request"),
        ("replay", {"from": "middle"}, "invalid_request"),
        ("replay", {"dry_run": "yes"}, "invalid_request"),
    ):
        answer = api.post(f"/api/v1/executions/{action}", body, format="json")
        assert (answer.status_code, answer.json()["error"]) == (400, code), body
    unknown = api.post("/api/v1/executions/cancel", {"filter": {"workflow": "x"}}, format="json")
    assert (unknown.status_code, unknown.json()["error"]) == (404, "workflow_not_found")
    made = api.post("/api/v1/executions/cancel", {"filter": {"workflow": "other"}}, format="json")
    foreign = other_api.get(f"/api/v1/bulk/{made.json()['bulk_id']}")
    assert (foreign.status_code, foreign.json()["error"]) == (404, "bulk_not_found")
    assert BulkAction.objects.count() == 1


def test_the_cli_counts_then_replays_by_filter(team, executions):
    out = run(
        "mantle_replay",
        "--filter",
        "workflow=deploy",
        "--filter",
        "key=a",
        "--team",
        "acme",
        "--dry-run",
    )
    assert out.strip() == "20 matched (dry run)"
    out = run("mantle_cancel", "--filter", "status=pending", "--team", "acme")
    bulk_id = out.split()[1].rstrip(":")
    assert out.strip().endswith("5 matched")
    bulk._batch(BulkAction.objects.get(id=bulk_id).id)
    assert Execution.objects.filter(status="cancelled").count() == 5
    assert exit_code("mantle_cancel", "--filter", "status=failed", "--team", "acme") == 2
    assert exit_code("mantle_cancel", "--filter", "colour=red", "--team", "acme") == 2
    assert exit_code("mantle_cancel", "--filter", "status=pending") == 2
    assert exit_code("mantle_replay") == 2


def test_a_bulk_replay_of_a_cancel_running_workflow_holds_its_limit(api, team):
    """A replay that supersedes another ends it before the next replay of its batch is decided,
    as admissions one at a time do: one holder in the end, the others cancelled by the next."""
    content = workflow_yaml("newest", limit=1, on_limit="cancel_running")
    newest = workflow_apply(team=team, content=content).workflow
    for _ in range(6):
        ExecutionFactory(workflow=newest, status="failed")
    made = api.post("/api/v1/executions/replay", {"filter": {"workflow": "newest"}}, format="json")
    assert made.status_code == 202
    while BulkAction.objects.get().status == "running":
        bulk._batch(made.json()["bulk_id"])
    replays = Execution.objects.filter(replay_of__isnull=False)
    assert replays.filter(status="pending").count() == 1
    cancelled = replays.filter(status="cancelled")
    assert cancelled.count() == 5
    assert all(e.error.startswith("superseded by") for e in cancelled)
