from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from executions.models import Execution, QueueSample, Status
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.lifecycle import execution_finish
from executions.services.promotion import queue_promote
from executions.services.queue_samples import queue_sample_record
from executions.services.retention import prune
from teams.services import named_limit_set
from tests.factories import (
    KEYED,
    ExecutionFactory,
    QueueSampleFactory,
    StepExecutionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def live(client):
    response = client.get(reverse("dashboard:live"))
    assert response.status_code == 200
    return response


def row_of(html: str, attribute: str) -> str:
    row = html[html.index(attribute) :]
    return row[: row.index("</tr>")]


def test_it_sends_anonymous_users_to_sign_in(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("dashboard:login"))


def test_members_see_their_teams_only(client, make_team, make_user):
    mine, theirs = make_team("mine"), make_team("theirs")
    client.force_login(make_user("ann", teams=(mine,)))
    panels = live(client).context["panels"]
    assert [p.team.slug for p in panels] == ["mine"]
    assert theirs.slug not in [p.team.slug for p in panels]


def test_staff_see_every_team(client, make_team, make_user):
    make_team("one"), make_team("two")
    client.force_login(make_user("root", staff=True))
    assert [p.team.slug for p in live(client).context["panels"]] == ["one", "two"]


def test_it_shows_the_queue_in_order_with_positions_and_blockers(
    client, make_team, make_workflow, make_user
):
    team = make_team("acme", max_concurrent_executions=2)
    deploy, build = make_workflow(team, "deploy", limit=1), make_workflow(team, "build")
    execution_admit(team=team, workflow=deploy)
    first = execution_admit(team=team, workflow=deploy).execution
    execution_admit(team=team, workflow=build)
    third = execution_admit(team=team, workflow=build).execution
    second = execution_admit(team=team, workflow=deploy).execution
    client.force_login(make_user("ann", teams=(team,)))
    [panel] = live(client).context["panels"]
    assert [(e.id, e.workflow, e.position) for e in panel.queued_executions] == [
        (first.id, "deploy", 1),
        (third.id, "build", 2),
        (second.id, "deploy", 3),
    ]
    assert [e.blocked_by for e in panel.queued_executions] == ["workflow", "team", "team"]
    html = live(client).content.decode()
    assert "the workflow's limit" in row_of(html, f'data-execution="{first.id}"')
    assert "the team's limit" in row_of(html, f'data-execution="{third.id}"')
    assert (panel.running, panel.limit, panel.queued) == (2, 2, 3)
    by_name = {w.queue.name: w for w in panel.workflows}
    assert by_name["deploy"].queue.running == 1 and by_name["deploy"].queue.queued == 2
    assert by_name["deploy"].oldest_wait_seconds is not None


def test_positions_are_the_order_promotion_then_takes_the_whole_queue_in(
    client, make_team, make_workflow, make_user
):
    """Keys round-robin, higher priority first, FIFO within a key, workflows merged: the
    dashboard's 1, 2, 3 … is the order in which freeing one slot at a time promotes them."""
    team = make_team("acme", max_concurrent_executions=1)
    sync = make_workflow(team, "sync", extra=KEYED)
    urgent = make_workflow(team, "urgent")
    running = execution_admit(team=team, workflow=sync, inputs={"customer": "z"}).execution
    for customer in ["a", "a", "a", "b", "c", "b"]:
        execution_admit(team=team, workflow=sync, inputs={"customer": customer})
    execution_admit(team=team, workflow=urgent, priority=5)
    client.force_login(make_user("ann", teams=(team,)))
    [panel] = live(client).context["panels"]
    shown = [(e.position, e.workflow, e.concurrency_key) for e in panel.queued_executions]
    assert shown == [
        (1, "urgent", ""),
        (2, "sync", "a"),
        (3, "sync", "b"),
        (4, "sync", "c"),
        (5, "sync", "a"),
        (6, "sync", "b"),
        (7, "sync", "a"),
    ]
    html = live(client).content.decode()
    numbers = [row_of(html, f'data-execution="{e.id}"') for e in panel.queued_executions]
    assert all(f'data-label="Position" class="num">{n}<' in row for n, row in enumerate(numbers, 1))
    promoted = []
    for _ in panel.queued_executions:
        execution_finish(running.id, status=Status.COMPLETED)
        [promoted_id] = queue_promote(team.id, trigger="test")
        running = Execution.objects.get(id=promoted_id)
        promoted.append(running.id)
    assert promoted == [e.id for e in panel.queued_executions]


def test_each_workflow_shows_its_busiest_keys_with_running_limit_queued_and_oldest_wait(
    client, team, make_workflow, make_user
):
    keyed = f"{KEYED}max_parallel_per_key: 1\n"
    workflow = make_workflow(team, "sync", extra=keyed)
    for customer in ["a", "a", "b", "b", "b", "c"]:
        execution_admit(team=team, workflow=workflow, inputs={"customer": customer})
    oldest_b = Execution.objects.filter(concurrency_key="b", status=Status.QUEUED).earliest(
        "created_at"
    )
    Execution.objects.filter(id=oldest_b.id).update(
        created_at=oldest_b.created_at - timedelta(minutes=3)
    )
    client.force_login(make_user("ann", teams=(team,)))
    response = live(client)
    [panel] = response.context["panels"]
    [sync] = panel.workflows
    shown = [
        (k.queue.key, k.queue.running, k.queue.queued, k.oldest_wait_seconds is not None)
        for k in sync.busiest_keys
    ]
    assert shown == [("b", 1, 2, True), ("a", 1, 1, True), ("c", 1, 0, False)]
    assert 180 <= sync.busiest_keys[0].oldest_wait_seconds < 240
    html = response.content.decode()
    row = html[html.index('data-key="b"') :]
    row = row[: row.index("</tr>")]
    assert "1 / 1" in row and ">2<" in row and "3m " in row


def test_a_rate_per_key_shows_each_keys_window_in_its_busiest_keys(
    client, team, make_workflow, make_user
):
    extra = f"{KEYED}rate_limit: {{max: 2, period: 30s, per_key: true}}\n"
    workflow = make_workflow(team, "sync", extra=extra)
    for customer in ["acme", "acme", "acme", "beta"]:
        execution_admit(team=team, workflow=workflow, inputs={"customer": customer})
    client.force_login(make_user("ann", teams=(team,)))
    response = live(client)
    [panel] = response.context["panels"]
    [sync] = panel.workflows
    windows = {k.queue.key: (k.queue.rate_in_window, k.queue.queued) for k in sync.busiest_keys}
    assert windows == {"acme": (2, 1), "beta": (1, 0)}
    html = response.content.decode()
    # Each key's window against the max, never the workflow's three against a key's two.
    rate = row_of(html, 'data-workflow="sync"').split('data-label="Rate"')[1]
    assert "per key, max 2 per 30s" in rate and "3 / 2" not in rate
    assert "2 / 2 per 30s" in row_of(html, 'data-key="acme"')
    assert "1 / 2 per 30s" in row_of(html, 'data-key="beta"')


def test_it_shows_named_limits_rate_windows_debounces_and_what_blocks_each_queued_one(
    client, team, make_workflow, make_user
):
    named_limit_set(team=team, name="prod-db", max=3)
    shared = make_workflow(team, "migrate", extra="limits: [prod-db]\n")
    holders = [execution_admit(team=team, workflow=shared).execution for _ in range(3)]
    waiting = execution_admit(team=team, workflow=shared).execution
    # A holder ends; its promotion runs on commit, which this test's transaction never reaches:
    # the limit shows 2 / 3 with the one still queued for it.
    execution_finish(holders[0].id, status=Status.COMPLETED)
    rated = make_workflow(team, "report", extra="rate_limit: {max: 2, period: 30s}\n")
    for _ in range(3):
        execution_admit(team=team, workflow=rated)
    keyed = make_workflow(team, "sync", extra=f"{KEYED}max_parallel_per_key: 1\n")
    execution_admit(team=team, workflow=keyed, inputs={"customer": "acme"})
    execution_admit(team=team, workflow=keyed, inputs={"customer": "acme"})
    bounced = make_workflow(team, "notify", extra="debounce: 30s\n")
    debounced = execution_admit(team=team, workflow=bounced).execution
    client.force_login(make_user("ann", teams=(team,)))
    response = live(client)
    [panel] = response.context["panels"]
    [usage] = panel.named_limits
    assert (usage.name, usage.in_use, usage.max, usage.queued) == ("prod-db", 2, 3, 1)
    queues = {w.queue.name: w.queue for w in panel.workflows}
    report = queues["report"]
    assert (report.rate_in_window, report.rate_max, report.rate_period_seconds) == (2, 2, 30)
    blockers = {e.workflow: e for e in panel.queued_executions}
    assert {name: e.blocked_by for name, e in blockers.items()} == {
        "migrate": "limit",
        "report": "rate",
        "sync": "key",
        "notify": "debounce",
    }
    assert blockers["migrate"].id == waiting.id
    due = Execution.objects.get(id=debounced.id).not_before
    assert blockers["notify"].not_before == due
    assert (queues["notify"].debounced, queues["notify"].next_debounce_due) == (1, due)
    html = response.content.decode()
    limit_row = row_of(html, 'data-limit="prod-db"')
    assert "2 / 3" in limit_row and ">1<" in limit_row
    assert "2 / 2 per 30s" in row_of(html, 'data-workflow="report"')
    assert "—" in row_of(html, 'data-workflow="sync"').split('data-label="Rate"')[1]
    shown = {e.workflow: row_of(html, f'data-execution="{e.id}"') for e in blockers.values()}
    assert "limit <code>prod-db</code>" in shown["migrate"]
    assert "rate window" in shown["report"]
    assert "key <code>acme</code>" in shown["sync"]
    due_text = f"{timezone.localtime(due):%H:%M:%S}"
    assert f"debounce until {due_text}" in shown["notify"]
    assert f"1 debounced, next due {due_text}" in row_of(html, 'data-workflow="notify"')
    assert " limit</span>" not in html


def test_it_counts_rejections_of_the_last_hour(client, team, make_workflow, make_user):
    workflow = make_workflow(team, limit=1, on_limit="reject")
    execution_admit(team=team, workflow=workflow)
    for _ in range(3):
        with pytest.raises(ConcurrencyLimitExceeded):
            execution_admit(team=team, workflow=workflow)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE executions_rejection SET created_at = now() - interval '2 hours'"
            " WHERE id = (SELECT min(id) FROM executions_rejection)"
        )
    client.force_login(make_user("ann", teams=(team,)))
    [panel] = live(client).context["panels"]
    assert panel.rejected_last_hour == 2
    assert panel.workflows[0].rejected_last_hour == 2


def test_running_executions_show_their_steps_progress_counting_every_fan_out_item(
    client, team, make_workflow, make_user
):
    steps = (
        "  - name: fetch\n    action: test/noop\n"
        "  - name: fan\n    action: test/echo\n    depends_on: [fetch]\n"
        '    for_each: "{{ [1, 2, 3, 4] }}"\n    max_parallel: 2\n'
        "  - name: report\n    action: test/noop\n    depends_on: [fan]\n"
    )
    execution = ExecutionFactory(workflow=make_workflow(team, steps=steps))
    StepExecutionFactory(execution=execution, name="fetch", status="completed")
    StepExecutionFactory(
        execution=execution, name="fan", status="running", items=["a", "b", "c", "d"]
    )
    # The branches are created as max_parallel allows: two done, one running, one not yet;
    # `report` has no row yet but counts: 1 + 4 items + 1.
    for index, status in enumerate(["completed", "completed", "running"]):
        StepExecutionFactory(execution=execution, name="fan", fanout_index=index, status=status)
    client.force_login(make_user("ann", teams=(team,)))
    [panel] = live(client).context["panels"]
    [running] = panel.running_executions
    assert (running.id, running.status, running.steps_done, running.steps_total) == (
        execution.id,
        "pending",
        3,
        6,
    )


def test_the_chart_shows_sampled_depth_per_minute_and_the_live_depth_last(
    client, team, make_workflow, make_user
):
    workflow = make_workflow(team, limit=1)
    for _ in range(4):
        execution_admit(team=team, workflow=workflow)
    QueueSampleFactory(workflow=workflow, queued=7, running=1)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE executions_queuesample SET taken_at = now() - interval '10 minutes'")
    client.force_login(make_user("ann", teams=(team,)))
    [panel] = live(client).context["panels"]
    series = panel.workflows[0].depth_per_minute
    assert len(series) == 60
    assert series[-11] == 7
    assert series[-1] == 3
    assert sum(series) == 10


def test_a_refresh_costs_the_same_few_queries_however_many_teams_and_rows(
    client, make_team, make_workflow, make_user, django_assert_max_num_queries
):
    user = make_user("root", staff=True)
    for n in range(4):
        team = make_team(f"team-{n}", max_concurrent_executions=2)
        for name in ("a", "b", "c"):
            workflow = make_workflow(team, name, limit=1, on_limit="queue")
            for _ in range(3):
                execution_admit(team=team, workflow=workflow)
            QueueSampleFactory(workflow=workflow, queued=2, running=1)
    client.force_login(user)
    # session, user, teams, queues, busiest keys, named limits, bulk actions, rejections,
    # samples, queued, running
    with django_assert_max_num_queries(11):
        live(client)
    with django_assert_max_num_queries(11):
        client.get("/")


def test_cancel_from_the_dashboard_cancels_and_promotes_the_next(
    client, team, make_workflow, make_user, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1)
    holder = execution_admit(team=team, workflow=workflow).execution
    queued = execution_admit(team=team, workflow=workflow).execution
    client.force_login(make_user("ann", teams=(team,)))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("dashboard:cancel", args=[holder.id]), HTTP_HX_REQUEST="true"
        )
    assert response.status_code == 200
    assert b"Cancelled deploy" in response.content
    assert Execution.objects.get(id=holder.id).status == Status.CANCELLED
    assert Execution.objects.get(id=queued.id).status == Status.PENDING


def test_cancelling_a_finished_execution_says_it_was_not_cancelled(
    client, team, make_workflow, make_user
):
    execution = execution_admit(team=team, workflow=make_workflow(team)).execution
    execution_finish(execution.id, status=Status.COMPLETED)
    client.force_login(make_user("ann", teams=(team,)))
    response = client.post(reverse("dashboard:cancel", args=[execution.id]), follow=True)
    assert b"already completed" in response.content
    assert Execution.objects.get(id=execution.id).status == Status.COMPLETED


def test_it_will_not_cancel_another_teams_execution(client, make_team, make_workflow, make_user):
    mine, theirs = make_team("mine"), make_team("theirs")
    execution = execution_admit(team=theirs, workflow=make_workflow(theirs)).execution
    client.force_login(make_user("ann", teams=(mine,)))
    response = client.post(reverse("dashboard:cancel", args=[execution.id]))
    assert response.status_code == 404
    assert Execution.objects.get(id=execution.id).status == Status.PENDING


def test_the_sampler_records_live_queues_only_and_retention_forgets_old_samples(
    team, make_workflow
):
    busy, idle = make_workflow(team, "busy", limit=1), make_workflow(team, "idle")
    for _ in range(3):
        execution_admit(team=team, workflow=busy)
    execution_finish(
        execution_admit(team=team, workflow=idle).execution.id, status=Status.COMPLETED
    )
    QueueSampleFactory(workflow=busy, queued=9, running=1)
    QueueSample.objects.filter(queued=9).update(
        taken_at=QueueSample.objects.get().taken_at - timedelta(hours=3)
    )
    assert queue_sample_record() == 1
    assert prune()["queue_samples"] == 1
    sample = QueueSample.objects.get()
    assert (sample.workflow_id, sample.queued, sample.running) == (busy.id, 2, 1)


def test_whitenoise_serves_the_collected_htmx_and_stylesheet(client, settings, tmp_path):
    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", "--noinput", verbosity=0)
    for name in ("dashboard/htmx-2.0.11.min.js", "dashboard/dashboard.css"):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200
        assert type(response).__module__.startswith("whitenoise")


def test_staff_without_permissions_cannot_cancel_another_teams_execution(
    client, make_team, make_workflow, make_user
):
    """Being staff is not the admin's permission: such a user sees and cancels only the teams
    they are a member of, like the admin that refuses them."""
    mine, theirs = make_team("mine"), make_team("theirs")
    execution = execution_admit(team=theirs, workflow=make_workflow(theirs)).execution
    own = execution_admit(team=mine, workflow=make_workflow(mine)).execution
    user = UserFactory(username="sam", is_staff=True, teams=[mine])
    client.force_login(user)
    assert [p.team.slug for p in live(client).context["panels"]] == ["mine"]
    assert client.post(reverse("dashboard:cancel", args=[execution.id])).status_code == 404
    assert Execution.objects.get(id=execution.id).status == Status.PENDING
    client.post(reverse("dashboard:cancel", args=[own.id]))
    assert Execution.objects.get(id=own.id).status == Status.CANCELLED


def test_viewing_without_the_cancel_permission_shows_no_cancel_and_refuses_it(
    client, make_team, make_workflow, make_user
):
    mine, theirs = make_team("mine"), make_team("theirs")
    theirs_workflow = make_workflow(theirs, limit=1)
    execution_admit(team=theirs, workflow=theirs_workflow)
    queued = execution_admit(team=theirs, workflow=theirs_workflow).execution
    user = UserFactory(username="viv", is_staff=True, teams=[mine])
    user.user_permissions.add(Permission.objects.get(codename="view_execution"))
    client.force_login(user)
    response = live(client)
    assert [p.team.slug for p in response.context["panels"]] == ["mine", "theirs"]
    assert str(queued.id) in response.content.decode()
    assert b'class="cancel"' not in response.content
    assert client.post(reverse("dashboard:cancel", args=[queued.id])).status_code == 403
    assert Execution.objects.get(id=queued.id).status == Status.QUEUED
    user.user_permissions.add(Permission.objects.get(codename="change_execution"))
    client.post(reverse("dashboard:cancel", args=[queued.id]))
    assert Execution.objects.get(id=queued.id).status == Status.CANCELLED


def test_an_execution_id_links_to_its_page_with_status_blocker_and_redacted_inputs(
    client, team, make_workflow, make_user
):
    named_limit_set(team=team, name="prod-db", max=1)
    workflow = make_workflow(
        team, "migrate", extra="limits: [prod-db]\ninputs:\n  db: {type: string}\n"
    )
    execution_admit(team=team, workflow=workflow, inputs={"db": "a"})
    inputs = {"db": "b", "api_token": "tok-123", "nested": {"Password": "pw-456", "keep": 1}}
    queued = execution_admit(team=team, workflow=workflow, inputs=inputs).execution
    client.force_login(make_user("ann", teams=(team,)))
    url = reverse("dashboard:execution", args=[queued.id])
    assert f'href="{url}"' in row_of(live(client).content.decode(), f'data-execution="{queued.id}"')
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert '<span class="tag status-queued" data-testid="status">queued</span>' in html
    assert "<code>limit</code> <code>prod-db</code>" in html
    for secret in ("tok-123", "pw-456"):
        assert secret not in html
    assert html.count("[redacted]") == 2
    assert "&quot;keep&quot;: 1" in html and "&quot;db&quot;: &quot;b&quot;" in html
    assert "None" not in html


def test_the_execution_page_pages_its_steps_as_the_api_does_and_shows_one_time_format(
    client, team, make_workflow, make_user
):
    execution = ExecutionFactory(workflow=make_workflow(team), status=Status.RUNNING)
    started = timezone.now() - timedelta(hours=3)
    steps = [
        StepExecutionFactory(
            execution=execution,
            name="fan",
            fanout_index=i,
            status="completed",
            started_at=started,
            output={"n": i, "secret": "s3"},
        )
        for i in range(60)
    ]
    client.force_login(make_user("ann", teams=(team,)))
    url = reverse("dashboard:execution", args=[execution.id])
    first = client.get(url).content.decode()
    assert [f'data-step="fan[{i}]"' in first for i in (0, 49, 50)] == [True, True, False]
    assert f'href="?after={steps[49].id}"' in first
    assert "60 completed" in first
    shown = f"{started.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    assert first.count(shown) == 50
    assert "s3" not in first and "None" not in first
    second = client.get(url, {"after": steps[49].id}).content.decode()
    assert [f'data-step="fan[{i}]"' in second for i in (49, 50, 59)] == [False, True, True]
    assert "?after=" not in second
    assert client.get(url, {"after": "x"}).status_code == 400


def test_the_execution_page_of_another_teams_execution_is_404(
    client, make_team, make_workflow, make_user
):
    theirs = make_team("theirs")
    execution = execution_admit(team=theirs, workflow=make_workflow(theirs)).execution
    client.force_login(make_user("ann", teams=(make_team("mine"),)))
    assert client.get(reverse("dashboard:execution", args=[execution.id])).status_code == 404


def test_the_execution_page_cancels_under_the_dashboards_permission(
    client, make_team, make_workflow, make_user
):
    mine, theirs = make_team("mine"), make_team("theirs")
    execution = execution_admit(team=theirs, workflow=make_workflow(theirs)).execution
    url = reverse("dashboard:execution", args=[execution.id])
    viewer = UserFactory(username="viv", is_staff=True, teams=[mine])
    viewer.user_permissions.add(Permission.objects.get(codename="view_execution"))
    client.force_login(viewer)
    assert client.get(url).status_code == 200
    assert b'class="cancel"' not in client.get(url).content
    cancel = reverse("dashboard:cancel", args=[execution.id])
    assert client.post(cancel, {"from": "execution"}).status_code == 403
    assert Execution.objects.get(id=execution.id).status == Status.PENDING
    client.force_login(make_user("ann", teams=(theirs,)))
    assert b'class="cancel"' in client.get(url).content
    response = client.post(cancel, {"from": "execution"}, follow=True)
    assert response.redirect_chain == [(url, 302)]
    assert Execution.objects.get(id=execution.id).status == Status.CANCELLED
    assert b"Cancelled deploy" in response.content
    assert b'class="cancel"' not in response.content


def test_favicon_ico_is_served(client, settings, tmp_path):
    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", "--noinput", verbosity=0)
    response = client.get("/favicon.ico", follow=True)
    assert response.redirect_chain == [("/static/dashboard/favicon.svg", 301)]
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(response.streaming_content)
