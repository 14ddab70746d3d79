"""The dashboard and the admin driven in Debian's Chromium through Playwright, against the app
served by the live server (real HTTP, real PostgreSQL, htmx polling)."""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.db.models import F
from playwright.sync_api import Browser, Page, expect, sync_playwright

from engine import dispatch, orchestrator
from executions.models import Execution, Status, StepExecution, StepStatus
from executions.services import bulk
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from teams.models import Team
from teams.services import named_limit_set
from tests.factories import KEYED, ApiKeyFactory, ExecutionFactory
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make browser)"),
]

WAIT_MS = 10_000


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    # Playwright's sync API keeps an event loop running in this thread; the ORM calls the tests
    # make between browser steps are plain blocking calls all the same.
    unsafe = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()
    if unsafe is None:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = unsafe


@pytest.fixture
def sign_in(browser: Browser, live_server, make_user) -> Iterator[Callable[..., Page]]:
    contexts = []

    def open_page(username: str, *, staff: bool = False, teams: tuple[Team, ...] = ()) -> Page:
        make_user(username, staff=staff, teams=teams)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(live_server.url + "/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill("s3cret-pass")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#live")).to_be_visible()
        return page

    yield open_page
    for context in contexts:
        context.close()


def team_stat(page: Page, team: Team, stat: str):
    return page.locator(f'section[data-team="{team.slug}"] [data-testid="team-{stat}"]')


def test_a_member_signs_in_and_sees_only_their_teams(sign_in, make_team, live_server):
    mine, theirs = make_team("payments"), make_team("search")
    page = sign_in("ann", teams=(mine,))
    expect(page.locator("section.team h2")).to_have_text(["payments"])
    assert theirs.slug not in page.content()
    assert page.evaluate("typeof htmx") == "object"  # the vendored htmx was served


def test_the_queue_builds_up_live_as_the_api_admits_executions(
    sign_in, make_team, make_workflow, live_server
):
    team = make_team("payments", max_concurrent_executions=2)
    make_workflow(team, "charge", limit=2)
    _, key = ApiKeyFactory(team=team)
    page = sign_in("ann", teams=(team,))
    expect(team_stat(page, team, "queued")).to_have_text("0")
    statuses: list[int] = []

    def post_runs_in_background() -> None:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=live_server.url, headers=headers, timeout=10) as api:
            for _ in range(6):
                statuses.append(api.post("/api/v1/run/charge", json={}).status_code)
                time.sleep(0.5)

    page.evaluate(
        """() => {
        const read = () => document.querySelector('[data-testid="team-queued"]').textContent;
        window.seen = [read()];
        document.body.addEventListener("htmx:afterSwap", () => window.seen.push(read()));
    }"""
    )
    thread = threading.Thread(target=post_runs_in_background)
    thread.start()
    thread.join(timeout=30)
    assert statuses == [202] * 6
    expect(team_stat(page, team, "queued")).to_have_text("4")
    expect(team_stat(page, team, "running")).to_have_text("2")
    positions = page.locator('tr[data-status="queued"] td[data-label="Position"]')
    expect(positions).to_have_text(["1", "2", "3", "4"])
    seen = [int(n) for n in page.evaluate("window.seen")]
    assert seen[0] == 0 and seen[-1] == 4 and seen == sorted(seen)  # one page, updated in place


def test_a_queued_execution_moves_to_running_without_a_reload(sign_in, make_team, make_workflow):
    team = make_team("payments")
    workflow = make_workflow(team, "charge", limit=1)
    holder = execution_admit(team=team, workflow=workflow).execution
    waiting = execution_admit(team=team, workflow=workflow).execution
    page = sign_in("ann", teams=(team,))
    page.evaluate("window.notReloaded = true")
    row = page.locator(f'tr[data-execution="{waiting.id}"]')
    expect(row).to_have_attribute("data-status", "queued")
    execution_finish(holder.id, status=Status.COMPLETED)
    # Promoted to pending: it holds a slot, so the dashboard lists it with the running ones.
    expect(row).to_have_attribute("data-status", "pending")
    expect(page.locator(f'tr[data-execution="{holder.id}"]')).to_have_count(0)
    assert page.evaluate("window.notReloaded") is True


def test_an_operator_cancels_a_queued_execution_from_the_page(sign_in, make_team, make_workflow):
    team = make_team("payments")
    workflow = make_workflow(team, "charge", limit=1)
    execution_admit(team=team, workflow=workflow)
    doomed = execution_admit(team=team, workflow=workflow).execution
    kept = execution_admit(team=team, workflow=workflow).execution
    page = sign_in("ann", teams=(team,))
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator(f'tr[data-execution="{doomed.id}"]').get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("status")).to_contain_text("Cancelled charge")
    expect(page.locator(f'tr[data-execution="{doomed.id}"]')).to_have_count(0)
    assert Execution.objects.get(id=doomed.id).status == Status.CANCELLED
    assert Execution.objects.get(id=kept.id).status == Status.QUEUED
    expect(page.locator(f'tr[data-execution="{kept.id}"] td[data-label="Position"]')).to_have_text(
        "1"
    )


def test_raising_a_team_limit_in_the_admin_promotes_its_queue(
    sign_in, make_team, make_workflow, live_server
):
    team = make_team("payments", max_concurrent_executions=1)
    workflow = make_workflow(team, "charge")
    for _ in range(4):
        execution_admit(team=team, workflow=workflow)
    page = sign_in("root", staff=True)
    expect(team_stat(page, team, "queued")).to_have_text("3")
    page.goto(live_server.url + "/admin/teams/team/")
    page.locator("#id_form-0-max_concurrent_executions").fill("3")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".messagelist")).to_contain_text("changed successfully")
    assert Execution.objects.filter(team=team, status=Status.QUEUED).count() == 1
    page.goto(live_server.url + "/")
    expect(team_stat(page, team, "running")).to_have_text("3")
    expect(team_stat(page, team, "queued")).to_have_text("1")


def test_an_operator_pauses_and_resumes_a_workflow_from_the_page(sign_in, make_team, make_workflow):
    team = make_team("payments")
    workflow = make_workflow(team, "charge")
    page = sign_in("ann", teams=(team,))
    page.on("dialog", lambda dialog: dialog.accept())
    row = page.locator('tr[data-workflow="charge"]')
    row.get_by_role("button", name="Pause workflow charge").click()
    expect(page.get_by_role("status")).to_contain_text("Paused workflow charge")
    expect(row.get_by_test_id("workflow-paused")).to_be_visible()
    held = execution_admit(team=team, workflow=workflow).execution
    expect(page.locator(f'tr[data-execution="{held.id}"]')).to_contain_text("paused")
    row.get_by_role("button", name="Resume workflow charge").click()
    expect(page.get_by_role("status")).to_contain_text("Resumed workflow charge")
    expect(row.get_by_test_id("workflow-paused")).to_have_count(0)
    assert Execution.objects.get(id=held.id).status == Status.PENDING


def test_a_keys_rate_window_fills_live_in_its_busiest_keys_row(sign_in, make_team, make_workflow):
    team = make_team("payments")
    extra = f"{KEYED}rate_limit: {{max: 2, period: 1m, per_key: true}}\n"
    workflow = make_workflow(team, "sync", extra=extra)
    for customer in ["acme", "acme", "acme", "beta"]:
        execution_admit(team=team, workflow=workflow, inputs={"customer": customer})
    page = sign_in("ann", teams=(team,))
    rate = page.locator('tr[data-workflow="sync"] td[data-label="Rate"]')
    expect(rate).to_have_text("per key, max 2 per 1m 00s")
    key_rate = 'tr[data-key="{}"] td[data-label="Rate"]'
    expect(page.locator(key_rate.format("acme"))).to_have_text("2 / 2 per 1m 00s")
    expect(page.locator(key_rate.format("beta"))).to_have_text("1 / 2 per 1m 00s")
    execution_admit(team=team, workflow=workflow, inputs={"customer": "beta"})
    expect(page.locator(key_rate.format("beta"))).to_have_text("2 / 2 per 1m 00s")


def test_the_dashboard_fits_a_phone_and_a_laptop(sign_in, busy_state, tmp_path):
    """Also writes the README's screenshots when MANTLE_SCREENSHOTS names a folder."""
    page = sign_in("ops", staff=True)
    out = os.environ.get("MANTLE_SCREENSHOTS") or str(tmp_path)
    for name, width, height in [("desktop", 1280, 900), ("phone", 390, 844)]:
        page.set_viewport_size({"width": width, "height": height})
        expect(page.locator('tr[data-status="queued"]').first).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=f"{out}/dashboard-{name}.png", full_page=name == "desktop")


@pytest.fixture
def busy_state(make_team, make_workflow) -> None:
    """An incident in progress: a webhook flood queues `ingest`, `payments` is at its limit."""
    payments = make_team("payments", max_concurrent_executions=4)
    search = make_team("search")
    charge = make_workflow(payments, "charge-card", limit=2)
    refund = make_workflow(payments, "refund", limit=1, on_limit="reject")
    ingest = make_workflow(search, "ingest-webhook", limit=3)
    payout = make_workflow(payments, "payout")
    reindex = make_workflow(search, "reindex", limit=0)
    counts = [(charge, 7), (refund, 1), (ingest, 9), (reindex, 2), (payout, 3)]
    for workflow, count in counts:
        for _ in range(count):
            execution_admit(team=workflow.team, workflow=workflow)
    _seed_history(refund, ingest, charge, payout)
    _seed_steps(payments, search)


def _seed_history(refund: WorkflowDefinition, *queues: WorkflowDefinition) -> None:
    with connection.cursor() as cursor:
        for n, workflow in enumerate(queues):
            now = Execution.objects.filter(workflow=workflow, status=Status.QUEUED).count()
            for minutes_ago in range(59, 0, -1):
                # A flood that peaked half an hour ago and drains towards today's depth.
                peak = 14 * math.exp(-(((minutes_ago - 28 - 6 * n) / 9) ** 2))
                depth = round(now * (60 - minutes_ago) / 60 + peak)
                cursor.execute(
                    "INSERT INTO executions_queuesample (workflow_id, queued, running, taken_at)"
                    " VALUES (%s, %s, 1, now() - make_interval(mins => %s))",
                    [workflow.id, depth, minutes_ago],
                )
        for minutes_ago in (2, 5, 9, 14, 30):
            cursor.execute(
                "INSERT INTO executions_rejection (team_id, workflow_id, scope, created_at)"
                " VALUES (%s, %s, 'workflow', now() - make_interval(mins => %s))",
                [refund.team_id, refund.id, minutes_ago],
            )
        # Ages that read like an incident rather than a test run.
        cursor.execute(
            "UPDATE executions_execution SET created_at = created_at - make_interval(secs =>"
            " 40 * (SELECT count(*) FROM executions_execution o WHERE o.created_at > "
            " executions_execution.created_at))"
        )


def _seed_steps(*teams: Team) -> None:
    holders = Execution.objects.filter(team__in=teams, status=Status.PENDING).order_by("created_at")
    steps = []
    for n, execution in enumerate(holders):
        # A step done, then a fan-out over 8 items whose branches are created as they start.
        done = (n * 3) % 8
        steps += [
            StepExecution(execution=execution, name="validate", status=StepStatus.COMPLETED),
            StepExecution(
                execution=execution, name="notify", status=StepStatus.RUNNING, items=[0] * 8
            ),
        ]
        steps += [
            StepExecution(
                execution=execution,
                name="notify",
                fanout_index=i,
                status=StepStatus.COMPLETED if i < done else StepStatus.RUNNING,
            )
            for i in range(done + 2)
        ]
    StepExecution.objects.bulk_create(steps)
    holders.update(status=Status.RUNNING, started_at=F("created_at"))


def test_an_execution_id_opens_its_page_where_an_operator_cancels_it(
    sign_in, make_team, make_workflow
):
    team = make_team("payments")
    workflow = make_workflow(team, "charge", limit=1)
    execution_admit(team=team, workflow=workflow)
    queued = execution_admit(
        team=team, workflow=workflow, inputs={"card_token": "tok-secret"}
    ).execution
    page = sign_in("ann", teams=(team,))
    row = page.locator(f'tr[data-execution="{queued.id}"]')
    row.get_by_role("link", name=str(queued.id)[:8]).click()
    expect(page.get_by_test_id("status")).to_have_text("queued")
    expect(page.get_by_test_id("blocked-by")).to_have_text("workflow")
    expect(page.get_by_test_id("inputs")).to_contain_text('"card_token": "[redacted]"')
    assert "tok-secret" not in page.content()
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("status")).to_contain_text("Cancelled charge")
    expect(page.get_by_test_id("status")).to_have_text("cancelled")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    assert Execution.objects.get(id=queued.id).status == Status.CANCELLED


def test_a_viewer_without_the_cancel_permission_sees_no_button_and_gets_403(
    sign_in, make_team, make_workflow, live_server
):
    theirs = make_team("search")
    execution = execution_admit(team=theirs, workflow=make_workflow(theirs, "index")).execution
    page = sign_in("viv", staff=False)
    viewer = User.objects.get(username="viv")
    viewer.user_permissions.add(Permission.objects.get(codename="view_execution"))
    page.goto(f"{live_server.url}/executions/{execution.id}/")
    expect(page.get_by_test_id("status")).to_have_text("pending")
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    refused = page.request.post(
        f"{live_server.url}/executions/{execution.id}/cancel/",
        form={"csrfmiddlewaretoken": token, "from": "execution"},
        headers={"X-CSRFToken": token},
        max_redirects=0,
    )
    assert refused.status == 403
    assert Execution.objects.get(id=execution.id).status == Status.PENDING


def test_the_pages_have_a_favicon(sign_in, make_team, live_server):
    page = sign_in("ann", teams=(make_team("payments"),))
    icon = page.locator('link[rel="icon"]').get_attribute("href")
    assert page.request.get(live_server.url + icon).status == 200
    assert page.request.get(live_server.url + "/favicon.ico").status == 200


def test_a_waiting_step_and_its_limit_show_live(sign_in, make_team):
    team = make_team("payments")
    named_limit_set(team=team, name="stripe-api", max=1)
    content = (
        "name: charge\nsteps:\n  - name: call\n    action: test/noop\n    limits: [stripe-api]\n"
    )
    workflow = workflow_apply(team=team, content=content).workflow
    for _ in range(2):
        execution_admit(team=team, workflow=workflow)
    orchestrator.executions_start(10, owner="test", room=0)
    [claim] = dispatch.steps_claim_limited("test", 10)
    page = sign_in("ann", teams=(team,))
    limit = page.locator('tr[data-limit="stripe-api"]')
    expect(limit.locator('[data-testid="limit-units"]')).to_have_text("1 / 1")
    expect(limit.locator('[data-testid="limit-waiting"]')).to_contain_text("1")
    waiting = page.locator('[data-testid="steps-waiting"]')
    expect(waiting).to_have_text("1 waiting for limit stripe-api")
    # The holder ends: the waiting step takes the unit, live.
    StepExecution.objects.filter(id=claim.id).update(status=StepStatus.COMPLETED)
    dispatch.steps_claim_limited("test", 10)
    expect(waiting).to_have_count(0)
    expect(limit.locator('[data-testid="limit-waiting"]')).to_have_text("0")


def test_a_bulk_replays_progress_updates_live(sign_in, make_team, make_workflow):
    team = make_team("payments")
    workflow = make_workflow(team, "charge")
    total = bulk.REPLAY_BATCH + 5  # two batches: a replay from the start admits REPLAY_BATCH
    for _ in range(total):
        ExecutionFactory(workflow=workflow, status=Status.FAILED)
    made = bulk.bulk_create(
        team=team, action=bulk.REPLAY, where=bulk.BulkFilter(status=Status.FAILED), limit=total
    )
    page = sign_in("ann", teams=(team,))
    row = page.locator(f'tr[data-bulk="{made.id}"]')
    expect(row.get_by_test_id("bulk-progress")).to_have_text(f"0 / {total}")
    bulk._batch(made.id)
    expect(row.get_by_test_id("bulk-progress")).to_have_text(f"{bulk.REPLAY_BATCH} / {total}")
    expect(row.get_by_test_id("bulk-status")).to_have_text("running")
    while bulk._batch(made.id) is not None:
        pass
    expect(row.get_by_test_id("bulk-progress")).to_have_text(f"{total} / {total}")
    expect(row.get_by_test_id("bulk-status")).to_have_text("completed")
