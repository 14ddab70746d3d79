"""Pause and resume (docs/operations.md, Pausing during an incident): a paused workflow, team or
named limit queues newcomers `blocked_by: "paused"` (or rejects them with `on_pause: reject`),
promotes nothing, lets its slot holders finish unless told to cancel them, and a resume promotes
in the usual order at once."""

from __future__ import annotations

import pytest
from django.urls import reverse

from executions.models import Execution, Rejection, Status
from executions.services.admission import PAUSED, ConcurrencyLimitExceeded, execution_admit
from executions.services.lifecycle import execution_finish
from executions.services.pauses import limit_pause_set, team_pause_set, workflow_pause_set
from teams.services import named_limit_set
from tests.commands import exit_code, run

pytestmark = pytest.mark.django_db(transaction=True)


def statuses(workflow) -> list[tuple[str, str | None]]:
    return list(
        Execution.objects.filter(workflow=workflow)
        .order_by("created_at")
        .values_list("status", "blocked_by")
    )


def test_a_paused_workflow_queues_newcomers_and_a_resume_promotes_them(team, make_workflow):
    workflow = make_workflow(team)
    other = make_workflow(team, "other")
    change = workflow_pause_set(workflow=workflow, paused=True)
    assert (change.paused, change.changed) == (True, True)
    queued = execution_admit(team=team, workflow=workflow)
    forced = execution_admit(team=team, workflow=workflow, force=True)
    assert (queued.status, queued.blocked_by, queued.blocked_by_name) == ("queued", "paused", None)
    assert (forced.status, forced.blocked_by) == ("queued", "paused")
    assert queued.queue_position == 1
    assert execution_admit(team=team, workflow=other).status == "pending"
    assert not workflow_pause_set(workflow=workflow, paused=True).changed
    resumed = workflow_pause_set(workflow=workflow, paused=False)
    assert (resumed.paused, resumed.changed, resumed.promoted) == (False, True, 2)
    assert statuses(workflow) == [("pending", None), ("pending", None)]


def test_a_completion_promotes_nothing_of_a_paused_workflow(team, make_workflow):
    workflow = make_workflow(team, limit=1)
    holder = execution_admit(team=team, workflow=workflow).execution
    waiting = execution_admit(team=team, workflow=workflow).execution
    workflow_pause_set(workflow=workflow, paused=True)
    # The pause relabels what was already queued; the holder drains.
    assert Execution.objects.get(id=waiting.id).blocked_by == "paused"
    execution_finish(holder.id, status=Status.COMPLETED)
    assert statuses(workflow) == [("completed", None), ("queued", "paused")]
    workflow_pause_set(workflow=workflow, paused=False)
    assert statuses(workflow) == [("completed", None), ("pending", None)]


def test_on_pause_reject_answers_paused_and_writes_no_execution(team, make_workflow):
    workflow = make_workflow(team, extra="on_pause: reject\n")
    workflow_pause_set(workflow=workflow, paused=True)
    with pytest.raises(ConcurrencyLimitExceeded) as rejected:
        execution_admit(team=team, workflow=workflow)
    assert (rejected.value.scope, rejected.value.limit) == (PAUSED, None)
    assert "paused" in str(rejected.value)
    assert not Execution.objects.exists()
    assert Rejection.objects.get().scope == "paused"


def test_a_paused_queue_still_keeps_max_queued(team, make_workflow):
    workflow = make_workflow(team, extra="max_queued: 1\n")
    workflow_pause_set(workflow=workflow, paused=True)
    execution_admit(team=team, workflow=workflow)
    with pytest.raises(ConcurrencyLimitExceeded) as rejected:
        execution_admit(team=team, workflow=workflow)
    assert rejected.value.scope == "queue_full"


def test_a_paused_team_holds_every_workflow_of_the_team_only(make_team, make_workflow):
    team, neighbour = make_team("acme"), make_team("neighbour")
    a, b = make_workflow(team, "a"), make_workflow(team, "b")
    theirs = make_workflow(neighbour, "a")
    team_pause_set(team=team, paused=True)
    assert [execution_admit(team=team, workflow=w).blocked_by for w in (a, b)] == [
        "paused",
        "paused",
    ]
    assert execution_admit(team=neighbour, workflow=theirs).status == "pending"
    assert team_pause_set(team=team, paused=False).promoted == 2


def test_a_paused_named_limit_holds_the_workflows_that_list_it(team, make_workflow):
    named_limit_set(team=team, name="prod-db", max=5)
    listing = make_workflow(team, "a", extra="limits: [prod-db]\n")
    free = make_workflow(team, "b")
    limit = team.named_limits.get()
    limit_pause_set(limit=limit, paused=True)
    held = execution_admit(team=team, workflow=listing)
    assert (held.status, held.blocked_by, held.blocked_by_name) == ("queued", "paused", "prod-db")
    assert execution_admit(team=team, workflow=free).status == "pending"
    limit_pause_set(limit=limit, paused=False)
    assert statuses(listing) == [("pending", None)]


def test_running_ones_drain_unless_the_pause_cancels_them(team, make_workflow):
    workflow = make_workflow(team)
    draining = execution_admit(team=team, workflow=workflow).execution
    assert workflow_pause_set(workflow=workflow, paused=True).cancelled == 0
    assert Execution.objects.get(id=draining.id).status == "pending"
    workflow_pause_set(workflow=workflow, paused=False)
    change = workflow_pause_set(workflow=workflow, paused=True, cancel_running=True)
    assert change.cancelled == 1
    cancelled = Execution.objects.get(id=draining.id)
    assert cancelled.status == "cancelled"
    assert cancelled.error == "cancelled by the pause of workflow deploy"


def test_a_resume_promotes_by_priority_then_in_fifo_order(team, make_workflow):
    workflow = make_workflow(team, limit=1)
    workflow_pause_set(workflow=workflow, paused=True)
    admitted = [
        execution_admit(team=team, workflow=workflow, priority=priority).execution.id
        for priority in (0, 5, 0, 5, 9)
    ]
    workflow_pause_set(workflow=workflow, paused=False)
    order = []
    while holder := Execution.objects.filter(workflow=workflow, status="pending").first():
        order.append(holder.id)
        execution_finish(holder.id, status=Status.COMPLETED)
    assert order == [admitted[4], admitted[1], admitted[3], admitted[0], admitted[2]]


def test_the_command_line_pauses_and_resumes_each_target(team, make_workflow):
    named_limit_set(team=team, name="prod-db", max=1)
    make_workflow(team)
    assert run("mantle_pause", "workflow", "deploy", "--team", "acme") == "workflow deploy paused\n"
    assert run("mantle_pause", "workflow", "deploy", "--team", "acme").endswith("already paused\n")
    assert run("mantle_pause", "team", "acme", "--cancel-running") == "team acme paused\n"
    assert run("mantle_pause", "limit", "prod-db", "--team", "acme") == "limit prod-db paused\n"
    execution_admit(team=team, workflow=team.workflows.get())
    assert run("mantle_resume", "team", "acme") == "team acme resumed\n"
    assert run("mantle_resume", "limit", "prod-db", "--team", "acme") == "limit prod-db resumed\n"
    out = run("mantle_resume", "workflow", "deploy", "--team", "acme")
    assert out == "workflow deploy resumed (1 promoted)\n"
    assert exit_code("mantle_pause", "workflow", "deploy") == 2  # no --team
    assert exit_code("mantle_pause", "team", "nobody") == 2
    assert exit_code("mantle_pause", "limit", "nope", "--team", "acme") == 2


@pytest.mark.parametrize(
    ("changelist", "row"),
    [
        ("admin:teams_team_changelist", lambda team: team),
        ("admin:workflows_workflowdefinition_changelist", lambda team: team.workflows.get()),
        ("admin:teams_namedlimit_changelist", lambda team: team.named_limits.get()),
    ],
)
def test_the_admin_pauses_and_resumes_from_the_lists(
    admin_client, team, make_workflow, changelist, row
):
    named_limit_set(team=team, name="prod-db", max=1)
    make_workflow(team, extra="limits: [prod-db]\n")
    target = row(team)
    url = reverse(changelist)
    admin_client.post(url, {"action": "pause", "_selected_action": [str(target.pk)]})
    target.refresh_from_db()
    assert target.paused_at is not None
    assert execution_admit(team=team, workflow=team.workflows.get()).blocked_by == "paused"
    assert b"icon-yes.svg" in admin_client.get(url).content  # the paused column
    admin_client.post(url, {"action": "resume", "_selected_action": [str(target.pk)]})
    target.refresh_from_db()
    assert target.paused_at is None
    assert Execution.objects.get().status == "pending"
