from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from prometheus_client import REGISTRY

from engine import cron
from executions.models import Execution
from executions.services.pauses import team_pause_set
from tests.concurrency.harness import run_in_threads
from workflows.models import WorkflowDefinition

CRON = """
name: nightly
max_parallel_executions: 1
triggers:
  - type: cron
    schedule: "*/5 * * * *"
steps:
  - name: only
    action: test/noop
"""


def test_a_cron_tick_is_admitted_once_however_many_schedulers_see_it(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    workflow = apply(CRON)
    since = datetime(2030, 1, 1, 0, 4, 59, tzinfo=UTC)
    until = datetime(2030, 1, 1, 0, 5, 1, tzinfo=UTC)
    created = run_in_threads([lambda: cron.admit_due(since=since, until=until)] * 4, threads=4)
    assert sum(created) == 1  # type: ignore[arg-type]
    execution = Execution.objects.get(workflow=workflow)
    assert execution.trigger["scheduled_at"] == "2030-01-01T00:05:00+00:00"


def test_cron_ticks_go_through_admission_and_queue_behind_the_limit(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    workflow = apply(CRON)
    for minute in (5, 10):
        tick = datetime(2030, 1, 1, 0, minute, tzinfo=UTC)
        cron.admit_due(since=tick.replace(second=0, minute=minute - 1), until=tick)
    statuses = list(Execution.objects.filter(workflow=workflow).order_by("created_at"))
    assert [e.status for e in statuses] == ["pending", "queued"]


def test_only_the_latest_tick_of_a_window_is_admitted() -> None:
    since, until = datetime(2030, 1, 1, 0, 0, tzinfo=UTC), datetime(2030, 1, 1, 1, 0, tzinfo=UTC)
    assert cron.latest_tick("*/5 * * * *", since=since, until=until) == until
    assert cron.latest_tick("*/5 * * * *", since=until, until=until) is None


def test_a_paused_workflow_skips_its_ticks_unless_it_queues_them(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    skipping = apply(CRON)
    queueing = apply(CRON.replace("name: nightly", "name: queued\non_pause: queue"))
    team_pause_set(team=skipping.team, paused=True)
    tick = datetime(2030, 1, 1, 0, 5, tzinfo=UTC)
    before = REGISTRY.get_sample_value(
        "mantle_cron_ticks_skipped_total", {"team": skipping.team.slug, "workflow": "nightly"}
    )
    assert cron.admit_due(since=tick.replace(minute=4), until=tick) == 1
    assert not Execution.objects.filter(workflow=skipping).exists()
    held = Execution.objects.get(workflow=queueing)
    assert (held.status, held.blocked_by) == ("queued", "paused")
    after = REGISTRY.get_sample_value(
        "mantle_cron_ticks_skipped_total", {"team": skipping.team.slug, "workflow": "nightly"}
    )
    assert after == (before or 0) + 1
