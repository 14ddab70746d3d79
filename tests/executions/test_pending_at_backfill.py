"""Migration 0015: executions that became pending before the rate-limit upgrade get the
pending_at a rate window counts, through the real migrator (the database migrated back to 0014,
rows written with 0014's models, then migrated forward)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import StateApps
from django.utils import timezone

from executions.models import Execution
from executions.services.admission import execution_admit
from teams.models import Team

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("executions", "0014_debounce")
BACKFILL = ("executions", "0015_pending_at_backfill")


def _migrate(target: tuple[str, str]) -> StateApps:
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return executor.loader.project_state([target]).apps


@pytest.fixture
def before_backfill() -> Iterator[StateApps]:
    """The models as of 0014, on a database migrated back to it; every app at its latest after."""
    apps = _migrate(BEFORE)
    yield apps
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_what_became_pending_before_the_upgrade_gets_its_pending_at(
    before_backfill, team, make_workflow
):
    workflow = make_workflow(team, "rated")
    old = before_backfill.get_model("executions", "Execution")
    now = timezone.now()
    created, promoted = now - timedelta(seconds=20), now - timedelta(seconds=10)

    def row(status: str, *, queued: bool, promoted_at=None, pending_at=None) -> str:
        execution = old.objects.create(
            team_id=team.id,
            workflow_id=workflow.id,
            version_id=workflow.current_version_id,
            status=status,
            created_at=created,
            queued_at=created if queued else None,
            promoted_at=promoted_at,
            pending_at=pending_at,
        )
        return execution.id

    admitted_pending = row("pending", queued=False)
    running_promoted = row("running", queued=True, promoted_at=promoted)
    completed_promoted = row("completed", queued=True, promoted_at=promoted)
    forced_then_failed = row("failed", queued=False)
    cancelled_while_queued = row("cancelled", queued=True)
    timed_out_in_queue = row("timed_out", queued=True)
    still_queued = row("queued", queued=True)
    already_set = row("pending", queued=False, pending_at=now)

    _migrate(BACKFILL)

    pending_at = dict(Execution.objects.values_list("id", "pending_at"))
    assert pending_at == {
        admitted_pending: created,
        running_promoted: promoted,
        completed_promoted: promoted,
        forced_then_failed: created,
        cancelled_while_queued: None,
        timed_out_in_queue: None,
        still_queued: None,
        already_set: now,
    }


def test_a_rate_window_after_the_upgrade_counts_them(before_backfill, team: Team, make_workflow):
    workflow = make_workflow(team, "rated")
    old = before_backfill.get_model("executions", "Execution")
    for status in ("running", "completed"):
        old.objects.create(
            team_id=team.id,
            workflow_id=workflow.id,
            version_id=workflow.current_version_id,
            status=status,
            created_at=timezone.now() - timedelta(seconds=5),
        )

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # the upgrade, 0015 and all after it
    rated = make_workflow(team, "rated", extra="rate_limit: {max: 2, period: 1m}\n")

    admitted = execution_admit(team=team, workflow=rated).execution
    assert (admitted.status, admitted.blocked_by) == ("queued", "rate")
