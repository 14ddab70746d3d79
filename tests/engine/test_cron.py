from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from engine import cron
from executions.models import Execution
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
