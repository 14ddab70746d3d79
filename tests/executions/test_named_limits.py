"""Named limits (docs/limits.md): a team's limit shared by every workflow that lists it, held while
pending or running, in admission and promotion alike; the CLI, the admin and the gauge."""

from __future__ import annotations

import pytest
from django.urls import reverse

from executions.models import Execution, Rejection, Status
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.lifecycle import execution_finish
from executions.services.named_limits import NamedLimitInUse, named_limit_delete
from teams.models import NamedLimit
from teams.services import named_limit_set
from tests.commands import exit_code, run
from tests.factories import workflow_yaml
from workflows.schema import WorkflowInvalid
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)


def sharing(make_workflow, team, *names: str, limits: str = "[prod-db]", **kwargs):
    return [make_workflow(team, name, extra=f"limits: {limits}\n", **kwargs) for name in names]


def statuses(workflow) -> list[str]:
    return list(
        Execution.objects.filter(workflow=workflow)
        .order_by("created_at")
        .values_list("status", flat=True)
    )


def test_workflows_that_list_a_limit_share_its_slots(team, make_workflow):
    named_limit_set(team=team, name="prod-db", max=2)
    a, b = sharing(make_workflow, team, "a", "b")
    first, second = (execution_admit(team=team, workflow=w) for w in (a, b))
    third = execution_admit(team=team, workflow=b)
    assert (first.status, second.status) == ("pending", "pending")
    assert (third.status, third.blocked_by, third.blocked_by_name) == ("queued", "limit", "prod-db")
    # FIFO across the workflows: a newcomer of `a` queues behind `b`'s queued one.
    assert execution_admit(team=team, workflow=a).blocked_by_name == "prod-db"
    execution_finish(first.execution.id, status=Status.COMPLETED)
    assert statuses(b) == ["pending", "pending"]
    assert statuses(a) == ["completed", "queued"]
    assert Execution.objects.get(workflow=a, status="queued").blocked_by_limit == "prod-db"


def test_the_lock_order_is_by_name_and_the_first_full_limit_blocks(team, make_workflow):
    named_limit_set(team=team, name="b-api", max=1)
    named_limit_set(team=team, name="a-db", max=5)
    (workflow,) = sharing(make_workflow, team, "w", limits="[b-api, a-db]")
    held = execution_admit(team=team, workflow=workflow).execution
    queued = execution_admit(team=team, workflow=workflow)
    assert queued.blocked_by_name == "b-api"
    ids = dict(NamedLimit.objects.values_list("name", "id"))
    held.refresh_from_db()
    assert held.named_limits == [ids["a-db"], ids["b-api"]]


def test_a_rejecting_workflow_is_refused_with_scope_limit_and_nothing_written(team, make_workflow):
    named_limit_set(team=team, name="prod-db", max=1)
    (workflow,) = sharing(make_workflow, team, "a", on_limit="reject")
    execution_admit(team=team, workflow=workflow)
    with pytest.raises(ConcurrencyLimitExceeded) as caught:
        execution_admit(team=team, workflow=workflow)
    assert (caught.value.scope, caught.value.limit, caught.value.name) == ("limit", 1, "prod-db")
    assert "limit 'prod-db' concurrency limit of 1 reached" in str(caught.value)
    assert Execution.objects.count() == 1
    assert Rejection.objects.get().scope == "limit"


def test_a_forced_execution_holds_the_limit(team, make_workflow):
    named_limit_set(team=team, name="prod-db", max=1)
    (workflow,) = sharing(make_workflow, team, "a")
    assert execution_admit(team=team, workflow=workflow, force=True).status == "pending"
    assert execution_admit(team=team, workflow=workflow).blocked_by == "limit"


@pytest.mark.parametrize("new_max", [3, 0], ids=["raised", "cleared"])
def test_raising_or_clearing_a_limit_promotes(team, make_workflow, new_max):
    named_limit_set(team=team, name="prod-db", max=1)
    a, b = sharing(make_workflow, team, "a", "b")
    for workflow in (a, b, a):
        execution_admit(team=team, workflow=workflow)
    named_limit_set(team=team, name="prod-db", max=new_max)
    assert Execution.objects.filter(status="pending").count() == 3


def test_one_passed_over_for_a_limit_the_next_does_not_hold_does_not_stop_the_next(
    team, make_workflow
):
    """A workflow whose `limits` changed while some were queued: its queue holds two sets, so
    promotion reads past the smallest free of the limits they share (a-db's 1)."""
    named_limit_set(team=team, name="a-db", max=1)
    named_limit_set(team=team, name="b-api", max=1)
    (workflow,) = sharing(make_workflow, team, "w", limits="[a-db, b-api]")
    (other,) = sharing(make_workflow, team, "other", limits="[b-api]")
    held = execution_admit(team=team, workflow=workflow).execution
    first_for_api = execution_admit(team=team, workflow=other).execution
    both = execution_admit(team=team, workflow=workflow).execution
    workflow_apply(team=team, content=workflow_yaml("w", extra="limits: [a-db]\n"))
    db_only = execution_admit(team=team, workflow=workflow).execution
    assert Execution.objects.filter(status="queued").count() == 3
    execution_finish(held.id, status=Status.COMPLETED)
    # `other`'s older one takes b-api; `both` finds it full and is passed over; `db_only` fits.
    now = dict(Execution.objects.values_list("id", "status"))
    assert [now[e.id] for e in (first_for_api, both, db_only)] == ["pending", "queued", "pending"]


def test_a_limit_that_is_not_full_labels_what_waits_for_another_reason(team, make_workflow):
    named_limit_set(team=team, name="prod-db", max=1)
    (workflow,) = sharing(make_workflow, team, "a", limit=1)
    held = execution_admit(team=team, workflow=workflow).execution
    execution_admit(team=team, workflow=workflow)
    named_limit_set(team=team, name="prod-db", max=5)
    queued = Execution.objects.get(status="queued")
    assert (queued.blocked_by, queued.blocked_by_limit) == ("workflow", None)
    execution_finish(held.id, status=Status.COMPLETED)
    assert statuses(workflow) == ["completed", "pending"]


def test_applying_a_workflow_that_names_an_unknown_limit_fails_at_its_path(team):
    named_limit_set(team=team, name="prod-db", max=1)
    content = workflow_yaml("w", extra="limits:\n  - prod-db\n  - nope\n")
    with pytest.raises(WorkflowInvalid) as caught:
        workflow_apply(team=team, content=content)
    (error,) = caught.value.errors
    assert (error.path, error.line) == ("limits[1]", 6)
    assert "unknown named limit 'nope'" in error.message


def test_deleting_a_limit_in_use_is_refused(team, make_workflow):
    named_limit_set(team=team, name="prod-db", max=1)
    (workflow,) = sharing(make_workflow, team, "a")
    execution_admit(team=team, workflow=workflow)
    execution_admit(team=team, workflow=workflow)
    with pytest.raises(NamedLimitInUse) as caught:
        named_limit_delete(team=team, name="prod-db")
    assert str(caught.value) == (
        "named limit 'prod-db' is in use: listed by the workflow(s) a;"
        " held or awaited by 2 live execution(s)"
    )
    # No longer listed, its executions still hold and await it.
    workflow_apply(team=team, content=workflow_yaml("a"))
    with pytest.raises(NamedLimitInUse, match="held or awaited by 2"):
        named_limit_delete(team=team, name="prod-db")
    Execution.objects.update(status=Status.COMPLETED)
    assert named_limit_delete(team=team, name="prod-db") is True
    assert named_limit_delete(team=team, name="prod-db") is False


def test_limits_set_list_and_delete_on_the_command_line(team, make_workflow):
    assert run("mantle_limits", "set", "acme", "prod-db", "2").strip() == ("prod-db created: max 2")
    (workflow,) = sharing(make_workflow, team, "a")
    for _ in range(2):
        execution_admit(team=team, workflow=workflow)
    queued = run("mantle_run", "a", "--team", "acme").splitlines()
    assert queued[1:] == ["queue position 1, blocked by limit prod-db"]
    assert run("mantle_limits", "list", "acme").splitlines() == [
        "name\tscope\tin use\tmax\tqueued\tunits in use\twaiting steps",
        "prod-db\tteam\t2\t2\t1\t0\t0",
    ]
    assert run("mantle_limits", "set", "acme", "prod-db", "--clear").strip() == (
        "prod-db set: max unlimited"
    )
    assert statuses(workflow) == ["pending"] * 3
    assert exit_code("mantle_limits", "delete", "acme", "prod-db") == 1
    assert exit_code("mantle_limits", "set", "acme", "Bad Name", "1") == 2
    assert exit_code("mantle_limits", "set", "nobody", "x", "1") == 2
    assert exit_code("mantle_limits", "delete", "acme", "nope") == 2
    assert exit_code("mantle_limits", "set", "acme", "prod-db", "-1") == 2
    assert exit_code("mantle_limits", "set", "acme", "prod-db") == 2


def test_a_global_limit_is_set_on_the_command_line_and_listed_by_every_team(team):
    assert run("mantle_limits", "set", "--global", "prod-db", "4").strip() == (
        "prod-db (global) created: max 4"
    )
    assert run("mantle_limits", "set", "--global", "prod-db", "--clear").strip() == (
        "prod-db (global) set: max unlimited"
    )
    assert run("mantle_limits", "list", "acme").splitlines()[1:] == [
        "prod-db\tglobal\t0\tunlimited\t0\t0\t0"
    ]
    assert exit_code("mantle_limits", "set", "--global", "acme", "prod-db", "4") == 2


def test_the_admin_edits_a_limit_in_the_list_and_a_raise_promotes(
    admin_client, team, make_workflow, django_capture_on_commit_callbacks
):
    limit, _ = named_limit_set(team=team, name="prod-db", max=1)
    (workflow,) = sharing(make_workflow, team, "a")
    for _ in range(3):
        execution_admit(team=team, workflow=workflow)
    form = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(limit.id),
        "form-0-max": "3",
        "_save": "Save",
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("admin:teams_namedlimit_changelist"), form)
    assert response.status_code == 302
    assert statuses(workflow) == ["pending"] * 3


def test_the_gauge_counts_the_slots_in_use(client, team, make_workflow):
    named_limit_set(team=team, name="prod-db", max=2)
    named_limit_set(team=team, name="idle", max=2)
    a, b = sharing(make_workflow, team, "a", "b")
    for workflow in (a, b, b):
        execution_admit(team=team, workflow=workflow)
    text = client.get("/metrics").content.decode()
    assert 'mantle_limit_slots_in_use{limit="prod-db",team="acme"} 2.0' in text
    assert 'mantle_limit_slots_in_use{limit="idle",team="acme"} 0.0' in text
