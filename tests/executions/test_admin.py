from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from executions.models import Execution, Status, StepStatus
from executions.services.admission import execution_admit
from tests.factories import ExecutionFactory, StepExecutionFactory, fanout_branches

pytestmark = pytest.mark.django_db


def test_the_execution_list_filters_without_counting_every_row(
    admin_client, team, make_workflow, django_assert_max_num_queries
):
    workflow = make_workflow(team, limit=1)
    for name in ("a", "b", "c", "d", "e"):
        make_workflow(team, name)
    for _ in range(4):
        execution_admit(team=team, workflow=workflow)
    url = reverse("admin:executions_execution_changelist")
    with django_assert_max_num_queries(12):
        response = admin_client.get(url, {"status__exact": "queued"})
    assert [e.status for e in response.context["cl"].result_list] == ["queued"] * 3
    assert response.context["cl"].show_full_result_count is False


def test_the_execution_detail_is_read_only_with_its_steps(admin_client, team, make_workflow):
    execution = ExecutionFactory(workflow=make_workflow(team), status=Status.RUNNING)
    StepExecutionFactory(execution=execution, name="only", status="running")
    response = admin_client.get(reverse("admin:executions_execution_change", args=[execution.id]))
    assert response.status_code == 200
    assert b"only" in response.content
    assert b'name="_save"' not in response.content


def test_a_10000_branch_execution_shows_counts_and_a_bounded_list(
    admin_client, team, make_workflow, django_assert_max_num_queries
):
    """Its page was 16 MB in 23 s (and killed at 1.1 GB under `mantle serve`) with every
    branch an inline."""
    execution = ExecutionFactory(workflow=make_workflow(team), status=Status.RUNNING)
    output = {"body": "x" * 200}
    fanout_branches(execution, 10_000, name="each", status=StepStatus.COMPLETED, output=output)
    with django_assert_max_num_queries(12):
        page = admin_client.get(reverse("admin:executions_execution_change", args=[execution.id]))
    assert page.status_code == 200
    assert len(page.content) < 100_000
    assert b"10000 completed" in page.content
    assert b"each[49]" in page.content and b"each[50]" not in page.content
    steps_url = reverse("admin:executions_stepexecution_changelist")
    assert f"{steps_url}?execution={execution.id}".encode() in page.content

    with django_assert_max_num_queries(12):
        steps = admin_client.get(steps_url, {"execution": execution.id})
    assert steps.status_code == 200
    assert len(steps.content) < 200_000
    assert [s.fanout_index for s in steps.context["cl"].result_list] == list(range(100))


def test_the_cancel_action_cancels_through_the_lifecycle_and_promotes(
    admin_client, team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1)
    holder = execution_admit(team=team, workflow=workflow).execution
    waiting = execution_admit(team=team, workflow=workflow).execution
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            reverse("admin:executions_execution_changelist"),
            {"action": "cancel", "_selected_action": [str(holder.id)]},
        )
    assert Execution.objects.get(id=holder.id).status == Status.CANCELLED
    assert Execution.objects.get(id=waiting.id).status == Status.PENDING


def test_the_execution_list_filters_by_concurrency_key(admin_client, team, make_workflow):
    extra = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'
    workflow = make_workflow(team, extra=extra)
    for customer in ("acme", "acme", "globex"):
        execution_admit(team=team, workflow=workflow, inputs={"customer": customer})
    url = reverse("admin:executions_execution_changelist")
    response = admin_client.get(url, {"key": "acme"})
    assert [e.concurrency_key for e in response.context["cl"].result_list] == ["acme", "acme"]
    assert b"globex" in admin_client.get(url).content  # a choice of the filter


def test_the_execution_detail_shows_every_time_one_way_and_dash_for_none(
    admin_client, team, make_workflow
):
    started = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    execution = ExecutionFactory(
        workflow=make_workflow(team), status=Status.RUNNING, created_at=started
    )
    Execution.objects.filter(id=execution.id).update(started_at=started)
    StepExecutionFactory(execution=execution, name="only", status="running", started_at=started)
    page = admin_client.get(reverse("admin:executions_execution_change", args=[execution.id]))
    html = page.content.decode()
    shown = f"{started.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    # created, started, the step's started
    assert html.count(shown) == 3
    assert "None" not in html
    assert f"{started.astimezone(UTC):%Y-%m-%dT%H}" not in html  # no raw ISO
    assert "a.m." not in html and "p.m." not in html  # nor Django's minute precision
    listed = admin_client.get(reverse("admin:executions_execution_changelist")).content.decode()
    assert shown in listed


def test_the_admin_index_puts_django_q2_apart_after_the_operators_models(admin_client):
    page = admin_client.get(reverse("admin:index"))
    sections = [app["name"] for app in page.context["app_list"]]
    assert sections[:4] == ["Teams", "Workflows", "Executions", "Authentication and Authorization"]
    assert sections[-1] == "Task queue (internal)"
    html = page.content.decode()
    assert html.index("Task queue (internal)") > html.index("Executions")
    assert "Django Q" not in html
