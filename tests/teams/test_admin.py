from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from teams.models import ApiKey, Team
from tests.factories import ApiKeyFactory

pytestmark = pytest.mark.django_db


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
            execution_admit(team=team, workflow=workflow)
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
        execution_admit(team=team, workflow=workflow)
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
    api_key, _ = ApiKeyFactory(team=team)
    admin_client.post(
        reverse("admin:teams_apikey_changelist"),
        {"action": "revoke", "_selected_action": [api_key.id]},
    )
    api_key.refresh_from_db()
    assert api_key.revoked_at is not None
