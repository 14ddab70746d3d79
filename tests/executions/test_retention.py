"""Retention (docs/operations.md, Retention): finished executions past their horizon go with
their steps and idempotency keys, rejections and finished bulk actions after the failed horizon,
the dashboard's queue samples after two hours; a workflow's own horizon
overrides mantle.yaml's, 0 keeps for ever; --dry-run counts exactly what a pass deletes; a prune
racing admissions, completions and promotions never deletes a live row."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, connections
from django.utils import timezone
from prometheus_client import REGISTRY

from executions.models import (
    TERMINAL,
    BulkAction,
    Execution,
    QueueSample,
    Rejection,
    StepExecution,
)
from executions.services import retention
from executions.services.admission import execution_admit
from executions.services.retention import prune
from mantle_site.config import ConfigError, RetentionConfig, load_config
from tests.commands import run
from tests.concurrency.test_admission_races import flood
from tests.factories import QueueSampleFactory, workflow_yaml
from workflows.schema import WorkflowInvalid
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)


def finished(team, workflow, status: str, *, days_ago: float, steps: int = 2) -> Execution:
    execution = execution_admit(team=team, workflow=workflow).execution
    Execution.objects.filter(id=execution.id).update(
        status=status,
        completed_at=timezone.now() - timedelta(days=days_ago),
        idempotency_key=f"key-{execution.id}",
    )
    for n in range(steps):
        StepExecution.objects.create(execution_id=execution.id, name=f"s{n}", status="completed")
    return execution


def with_retention(monkeypatch: pytest.MonkeyPatch, **horizons: float) -> None:
    retention = dataclasses.replace(settings.MANTLE.retention, **horizons)
    monkeypatch.setattr(
        settings, "MANTLE", dataclasses.replace(settings.MANTLE, retention=retention)
    )


def pruned_total(table: str) -> float:
    return REGISTRY.get_sample_value("mantle_pruned_total", {"table": table}) or 0.0


def test_it_prunes_what_is_past_each_horizon_and_dry_run_counts_it_exactly(team, make_workflow):
    workflow = make_workflow(team)
    old_done = finished(team, workflow, "completed", days_ago=31)
    finished(team, workflow, "completed", days_ago=29)  # kept: 30 days for completed
    old_failed = [finished(team, workflow, s, days_ago=91) for s in ("failed", "timed_out")]
    finished(team, workflow, "cancelled", days_ago=60)  # kept: 90 days for failed
    live = [execution_admit(team=team, workflow=workflow).execution for _ in range(2)]
    Rejection.objects.create(team=team, workflow=workflow)
    Rejection.objects.filter().update(created_at=timezone.now() - timedelta(days=100))
    Rejection.objects.create(team=team, workflow=workflow)
    QueueSampleFactory.create_batch(2, workflow=workflow)
    QueueSample.objects.filter(id=QueueSample.objects.first().id).update(
        taken_at=timezone.now() - timedelta(hours=3)
    )
    for days_ago in (100, 1):
        BulkAction.objects.create(
            team=team,
            action="cancel",
            execution_ids=[],
            status="completed",
            finished_at=timezone.now() - timedelta(days=days_ago),
        )
    counted = prune(dry_run=True)
    assert Execution.objects.count() == 7  # nothing deleted by the dry run
    before = pruned_total("steps")
    deleted = prune()
    assert counted == deleted
    assert dict(deleted) == {
        "executions": 3,
        "steps": 6,
        "rejections": 1,
        "bulk_actions": 1,
        "queue_samples": 1,
    }
    assert QueueSample.objects.count() == BulkAction.objects.count() == 1
    assert pruned_total("steps") == before + 6
    gone = {old_done.id, *(e.id for e in old_failed)}
    assert not Execution.objects.filter(id__in=gone).exists()
    assert Execution.objects.filter(id__in=[e.id for e in live]).count() == 2
    assert not StepExecution.objects.filter(execution_id__in=gone).exists()
    assert Rejection.objects.count() == 1
    assert sum(prune().values()) == 0


def test_a_workflows_horizon_overrides_the_default_and_0_keeps_for_ever(team, make_workflow):
    short = make_workflow(team, "short", extra="retention: {completed: 1d}\n")
    forever = make_workflow(team, "forever", extra="retention: {completed: 0, failed: 0}\n")
    default = make_workflow(team, "default")
    kept = [
        finished(team, forever, "completed", days_ago=400),
        finished(team, forever, "failed", days_ago=400),
        finished(team, default, "completed", days_ago=2),
        finished(team, short, "failed", days_ago=2),  # failed: mantle.yaml's 90 days
    ]
    doomed = finished(team, short, "completed", days_ago=2)
    assert prune()["executions"] == 1
    assert not Execution.objects.filter(id=doomed.id).exists()
    assert Execution.objects.filter(id__in=[e.id for e in kept]).count() == 4


def test_the_config_sets_the_default_horizons(team, make_workflow, monkeypatch):
    workflow = make_workflow(team)
    finished(team, workflow, "completed", days_ago=3)
    retention = dataclasses.replace(settings.MANTLE.retention, completed=2 * 86_400.0)
    monkeypatch.setattr(
        settings, "MANTLE", dataclasses.replace(settings.MANTLE, retention=retention)
    )
    out = run("mantle_prune", "--dry-run")
    assert (
        out
        == "would delete: 1 executions, 2 steps, 0 rejections, 0 bulk_actions, 0 queue_samples\n"
    )
    assert run("mantle_prune") == (
        "deleted: 1 executions, 2 steps, 0 rejections, 0 bulk_actions, 0 queue_samples\n"
    )


@pytest.fixture
def rows_per_transaction():
    """The rows each transaction deleted from the execution and step tables, by a trigger."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE deleted_by (txid bigint);"
            "CREATE FUNCTION log_deleted_by() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO deleted_by VALUES (txid_current()); RETURN OLD; END $$;"
            "CREATE TRIGGER log_deleted_by BEFORE DELETE ON executions_execution "
            "FOR EACH ROW EXECUTE FUNCTION log_deleted_by();"
            "CREATE TRIGGER log_deleted_by BEFORE DELETE ON executions_stepexecution "
            "FOR EACH ROW EXECUTE FUNCTION log_deleted_by();"
        )

    def read() -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM deleted_by GROUP BY txid")
            return [count for (count,) in cursor.fetchall()]

    yield read
    with connection.cursor() as cursor:
        cursor.execute(
            "DROP TRIGGER log_deleted_by ON executions_execution;"
            "DROP TRIGGER log_deleted_by ON executions_stepexecution;"
            "DROP FUNCTION log_deleted_by(); DROP TABLE deleted_by;"
        )


def test_each_transaction_deletes_at_most_a_batch_with_steps_first(
    team, make_workflow, monkeypatch, rows_per_transaction
):
    """Executions go with their steps, oldest first, at most BATCH rows a transaction: one with
    more steps than a batch (a fan-out's) is thinned in batches of its steps first."""
    monkeypatch.setattr(retention, "BATCH", 10)
    monkeypatch.setattr(retention, "DUTY", 1.0)
    workflow = make_workflow(team)
    for n in range(12):
        finished(team, workflow, "completed", days_ago=40 + n, steps=n % 4)
    finished(team, workflow, "failed", days_ago=400, steps=25)
    kept = finished(team, workflow, "completed", days_ago=1)
    assert prune(dry_run=True) == Counter(executions=13, steps=43)
    assert prune() == Counter(executions=13, steps=43)
    counts = rows_per_transaction()
    assert sum(counts) == 13 + 43 and max(counts) <= 10
    assert list(Execution.objects.values_list("id", flat=True)) == [kept.id]
    assert not StepExecution.objects.exclude(execution_id=kept.id).exists()


@pytest.fixture
def deletions_logged():
    """Every deleted execution's status as it was deleted, by a trigger (the row version the
    DELETE removed, after any concurrent update it waited for)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE deleted_statuses (status text);"
            "CREATE FUNCTION log_deleted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO deleted_statuses VALUES (OLD.status); RETURN OLD; END $$;"
            "CREATE TRIGGER log_deleted BEFORE DELETE ON executions_execution "
            "FOR EACH ROW EXECUTE FUNCTION log_deleted();"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute(
            "DROP TRIGGER log_deleted ON executions_execution; DROP FUNCTION log_deleted();"
            "DROP TABLE deleted_statuses;"
        )


def test_a_prune_racing_admissions_and_completions_never_deletes_a_live_row(
    team, make_workflow, monkeypatch, deletions_logged
):
    """Prunes with a horizon of a microsecond (whatever finishes is due at once) race a flood of
    admissions, completions and their promotions: every deleted row was terminal."""
    retention = dataclasses.replace(settings.MANTLE.retention, completed=1e-6, failed=1e-6)
    monkeypatch.setattr(
        settings, "MANTLE", dataclasses.replace(settings.MANTLE, retention=retention)
    )
    workflow = make_workflow(team, limit=5)
    done = threading.Event()
    passes = []

    def prune_until_done() -> None:
        try:
            while not done.is_set():
                passes.append(prune()["executions"])
        finally:
            connections.close_all()

    pruner = threading.Thread(target=prune_until_done)
    pruner.start()
    try:
        flood(team, [workflow], admissions=200)
    finally:
        done.set()
        pruner.join()
    with connection.cursor() as cursor:
        cursor.execute("SELECT status, count(*) FROM deleted_statuses GROUP BY status")
        deleted = dict(cursor.fetchall())
    print(f"\n{len(passes)} prunes during the flood deleted {deleted}")
    assert sum(passes) == sum(deleted.values()) > 0
    assert set(deleted) <= set(TERMINAL)
    assert Execution.objects.count() + sum(deleted.values()) == 200


def test_bad_horizons_are_refused_with_their_path(team, tmp_path):
    with pytest.raises(WorkflowInvalid) as invalid:
        workflow_apply(
            team=team,
            content=workflow_yaml(extra="retention:\n  completed: a month\n  kept: 1d\n"),
        )
    errors = {(e.path, e.line) for e in invalid.value.errors}
    assert errors == {("retention.completed", 5), ("retention.kept", 6)}
    config = tmp_path / "mantle.yaml"
    config.write_text("retention:\n  failed: 90 days\n")
    with pytest.raises(ConfigError, match=r"retention\.failed"):
        load_config(config, environ={})
    config.write_text("retention:\n  completed: 7d\n  failed: 0\n")
    assert load_config(config, environ={}).retention == RetentionConfig(7 * 86_400.0, 0.0)
