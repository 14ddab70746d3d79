"""Pause and resume from the dashboard (docs/operations.md, Pausing during an incident): the
buttons, the paused state, and the permission check of cancel (404 unseen, 403 seen only)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from executions.models import Execution
from executions.services import bulk
from executions.services.admission import execution_admit
from teams.services import named_limit_set
from tests.factories import ExecutionFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_member_pauses_and_resumes_a_workflow_a_limit_and_the_team(
    client, team, make_workflow, make_user
):
    named_limit_set(team=team, name="prod-db", max=1)
    workflow = make_workflow(team, extra="limits: [prod-db]\n")
    client.force_login(make_user("ann", teams=(team,)))
    url = reverse("dashboard:pause", args=[team.id])
    page = client.get(reverse("dashboard:live")).content.decode()
    assert 'aria-label="Pause workflow deploy"' in page
    assert 'aria-label="Pause team acme"' in page
    paused = client.post(url, {"action": "pause", "workflow": "deploy"}, HTTP_HX_REQUEST="true")
    page = paused.content.decode()
    assert "Paused workflow deploy." in page
    assert 'data-testid="workflow-paused"' in page
    assert 'aria-label="Resume workflow deploy"' in page
    assert execution_admit(team=team, workflow=workflow).blocked_by == "paused"
    client.post(url, {"action": "resume", "workflow": "deploy"})
    assert Execution.objects.get().status == "pending"
    client.post(url, {"action": "pause", "limit": "prod-db"})
    assert team.named_limits.get().paused_at is not None
    page = client.post(url, {"action": "pause"}, follow=True).content.decode()
    assert 'data-testid="team-paused"' in page
    assert 'aria-label="Resume team acme"' in page
    assert client.post(url, {"action": "pause", "workflow": "nope"}).status_code == 404


def test_pausing_is_refused_as_cancelling_is(client, make_team, make_workflow):
    mine, theirs = make_team("mine"), make_team("theirs")
    make_workflow(theirs)
    url = reverse("dashboard:pause", args=[theirs.id])
    member = UserFactory(username="sam", is_staff=True, teams=[mine])
    client.force_login(member)
    assert client.post(url, {"action": "pause"}).status_code == 404
    viewer = UserFactory(username="viv", is_staff=True, teams=[mine])
    viewer.user_permissions.add(Permission.objects.get(codename="view_execution"))
    client.force_login(viewer)
    assert (
        b'class="pause"' not in client.get(reverse("dashboard:live")).content.split(b"theirs")[-1]
    )
    assert client.post(url, {"action": "pause"}).status_code == 403
    theirs.refresh_from_db()
    assert theirs.paused_at is None
    viewer.user_permissions.add(Permission.objects.get(codename="change_execution"))
    client.post(url, {"action": "pause"})
    theirs.refresh_from_db()
    assert theirs.paused_at is not None


def test_the_progress_of_a_bulk_action_shows_on_the_team_panel(
    client, team, make_workflow, make_user
):
    """Two batches: a replay from the start admits REPLAY_BATCH at a time."""
    workflow = make_workflow(team)
    total = bulk.REPLAY_BATCH + 5
    for _ in range(total):
        ExecutionFactory(workflow=workflow, status="failed")
    made = bulk.bulk_create(
        team=team, action=bulk.REPLAY, where=bulk.BulkFilter(status="failed"), limit=total
    )
    client.force_login(make_user("ann", teams=(team,)))
    live = reverse("dashboard:live")
    page = client.get(live).content.decode()
    assert f'data-bulk="{made.id}"' in page
    assert f'<span class="num" data-testid="bulk-progress">0 / {total}</span>' in page
    bulk._batch(made.id)
    page = client.get(live).content.decode()
    assert f'data-testid="bulk-progress">{bulk.REPLAY_BATCH} / {total}</span>' in page
    assert 'data-testid="bulk-status">running</span>' in page
    while bulk._batch(made.id) is not None:
        pass
    page = client.get(live).content.decode()
    assert f'data-testid="bulk-progress">{total} / {total}</span>' in page
    assert 'data-testid="bulk-status">completed</span>' in page
