from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from executions.models import Execution, Status, StepExecution
from executions.services.admission import admit
from teams.models import ApiKey, Team
from teams.services import api_key_create
from tests.conftest import workflow_yaml
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("root", staff=True))
    return client


def changelist_post(team: Team, limit: str) -> dict[str, str]:
    return {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(team.id),
        "form-0-max_concurrent_executions": limit,
        "_save": "Save",
    }


def test_the_team_list_shows_limits_and_live_counts_in_a_fixed_number_of_queries(
    admin_client, make_team, make_workflow, django_assert_max_num_queries
):
    for n in range(5):
        team = make_team(f"t{n}", max_concurrent_executions=1)
        workflow = make_workflow(team)
        for _ in range(3):
            admit(team=team, workflow=workflow)
    with django_assert_max_num_queries(8):
        response = admin_client.get(reverse("admin:teams_team_changelist"))
    rows = {t.slug: (t.running_now, t.queued_now) for t in response.context["cl"].result_list}
    assert rows == {f"t{n}": (1, 2) for n in range(5)}


def test_raising_a_limit_in_the_list_promotes_queued_executions(
    admin_client, make_team, make_workflow, django_capture_on_commit_callbacks
):
    team = make_team("acme", max_concurrent_executions=1)
    workflow = make_workflow(team)
    for _ in range(3):
        admit(team=team, workflow=workflow)
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            reverse("admin:teams_team_changelist"), changelist_post(team, "3")
        )
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.max_concurrent_executions == 3
    assert not Execution.objects.filter(team=team, status=Status.QUEUED).exists()


def test_a_blank_limit_clears_the_override(admin_client, make_team):
    team = make_team("acme", max_concurrent_executions=4)
    admin_client.post(reverse("admin:teams_team_changelist"), changelist_post(team, ""))
    team.refresh_from_db()
    assert team.max_concurrent_executions is None


def test_a_negative_limit_is_refused_and_changes_nothing(admin_client, make_team):
    team = make_team("acme", max_concurrent_executions=4)
    response = admin_client.post(
        reverse("admin:teams_team_changelist"), changelist_post(team, "-1")
    )
    assert response.status_code == 200
    assert response.context["cl"].formset.errors[0]["max_concurrent_executions"]
    team.refresh_from_db()
    assert team.max_concurrent_executions == 4


def test_a_new_api_key_is_shown_once_and_only_its_hash_is_stored(admin_client, team):
    response = admin_client.post(
        reverse("admin:teams_apikey_add"), {"team": team.id, "name": "ci"}, follow=True
    )
    [shown] = [str(m) for m in get_messages(response.wsgi_request) if "shown this once" in str(m)]
    key = shown.rsplit(" ", 1)[1]
    assert key.startswith("mk_") and len(key) == 67
    stored = ApiKey.objects.get(team=team)
    assert stored.key_hash == ApiKey.hash(key)
    page = admin_client.get(reverse("admin:teams_apikey_change", args=[stored.id]))
    assert key.encode() not in page.content


def test_revoking_keys_from_the_list(admin_client, team):
    api_key, _ = api_key_create(team=team)
    admin_client.post(
        reverse("admin:teams_apikey_changelist"),
        {"action": "revoke", "_selected_action": [api_key.id]},
    )
    api_key.refresh_from_db()
    assert api_key.revoked_at is not None


def test_an_invalid_workflow_upload_shows_the_schema_errors_with_lines(admin_client, team):
    content = "name: Bad_Name\nsteps:\n  - name: a\n    action: nope/nope\n"
    response = admin_client.post(
        reverse("admin:workflows_workflowdefinition_upload"), {"team": team.id, "content": content}
    )
    assert response.status_code == 200
    errors = response.context["form"].errors["content"]
    assert any(e.startswith("line 1: name:") for e in errors)
    assert any(e.startswith("line 4:") for e in errors)
    assert not WorkflowDefinition.objects.exists()


def test_uploading_a_workflow_creates_it_then_adds_versions(admin_client, team):
    url = reverse("admin:workflows_workflowdefinition_upload")
    admin_client.post(url, {"team": team.id, "content": workflow_yaml("deploy", limit=2)})
    response = admin_client.post(
        url, {"team": team.id, "content": workflow_yaml("deploy", limit=5)}, follow=True
    )
    workflow = WorkflowDefinition.objects.get(team=team, name="deploy")
    assert workflow.current_version.number == 2
    assert workflow.current_version.max_parallel_executions == 5
    assert b"version 2" in response.content
    version_page = admin_client.get(
        reverse("admin:workflows_workflowversion_change", args=[workflow.current_version.id])
    )
    assert b"max_parallel_executions: 5" in version_page.content
    assert b'name="content"' not in version_page.content


def test_the_execution_list_filters_without_counting_every_row(
    admin_client, team, make_workflow, django_assert_max_num_queries
):
    workflow = make_workflow(team, limit=1)
    for name in ("a", "b", "c", "d", "e"):
        make_workflow(team, name)
    for _ in range(4):
        admit(team=team, workflow=workflow)
    url = reverse("admin:executions_execution_changelist")
    with django_assert_max_num_queries(12):
        response = admin_client.get(url, {"status__exact": "queued"})
    assert [e.status for e in response.context["cl"].result_list] == ["queued"] * 3
    assert response.context["cl"].show_full_result_count is False


def test_the_execution_detail_is_read_only_with_its_steps(admin_client, team, make_workflow):
    execution = admit(team=team, workflow=make_workflow(team)).execution
    StepExecution.objects.create(execution=execution, name="only", status="running")
    response = admin_client.get(reverse("admin:executions_execution_change", args=[execution.id]))
    assert response.status_code == 200
    assert b"only" in response.content
    assert b'name="_save"' not in response.content


def test_the_cancel_action_cancels_through_the_lifecycle_and_promotes(
    admin_client, team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1)
    holder = admit(team=team, workflow=workflow).execution
    waiting = admit(team=team, workflow=workflow).execution
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            reverse("admin:executions_execution_changelist"),
            {"action": "cancel", "_selected_action": [str(holder.id)]},
        )
    assert Execution.objects.get(id=holder.id).status == Status.CANCELLED
    assert Execution.objects.get(id=waiting.id).status == Status.PENDING
