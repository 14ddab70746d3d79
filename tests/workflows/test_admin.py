from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import SIGNED_WORKFLOW, workflow_yaml
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db


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


def test_the_upload_form_shows_no_secret_and_saving_it_keeps_them(admin_client, team):
    url = reverse("admin:workflows_workflowdefinition_upload")
    admin_client.post(url, {"team": team.id, "content": SIGNED_WORKFLOW})
    workflow = WorkflowDefinition.objects.get(team=team, name="signed")
    form = admin_client.get(url, {"workflow": workflow.id})
    shown = form.context["form"].initial["content"]
    assert shown.count("[redacted]") == 3
    for secret in (b"a quoted: secret", b"a-block-secret", b"a-plain-secret"):
        assert secret not in form.content

    admin_client.post(url, {"team": team.id, "content": "max_parallel_executions: 2\n" + shown})
    workflow.refresh_from_db()
    spec = workflow.current_version.spec
    assert (workflow.current_version.number, spec["max_parallel_executions"]) == (2, 2)
    assert [t["secret"] for t in spec["triggers"]] == [
        "a quoted: secret",
        "a-block-secret\n",
        "a-plain-secret",
    ]


def test_a_placeholder_with_no_stored_secret_is_an_error(admin_client, team):
    url = reverse("admin:workflows_workflowdefinition_upload")
    content = SIGNED_WORKFLOW.replace("'a quoted: secret'", "'[redacted]'")
    response = admin_client.post(url, {"team": team.id, "content": content})
    assert response.status_code == 200
    (error,) = response.context["form"].errors["content"]
    assert error.startswith("line 5: triggers.secret: '[redacted]' stands for a stored secret")
    assert not WorkflowDefinition.objects.exists()
