"""A long-running REPEATABLE READ transaction, open on a connection of its own with a snapshot
taken before a flood of admissions, while a real worker cluster runs and completes them.

Admission and promotion count slot holders in READ COMMITTED after their locks: a snapshot held
elsewhere must change neither the counts (the limit holds) nor when promotion happens (it follows
each completion's commit, not the poller)."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import psycopg
import pytest

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from teams.models import Team
from tests.concurrency.harness import Sampler, run_in_threads
from tests.engine.conftest import wait_for
from tests.processes import ENGINE, database_url
from workflows.services import workflow_apply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LIMIT = 2
FLOOD = 40

SHORT = f"""
name: short
max_parallel_executions: {LIMIT}
steps:
  - name: nap
    action: test/sleep
    params: {{seconds: 0.05}}
"""


def test_a_long_repeatable_read_snapshot_neither_breaks_the_limit_nor_stalls_promotion(
    engine: Callable[..., object], team: Team
) -> None:
    workflow = workflow_apply(team=team, content=SHORT).workflow
    engine()
    with psycopg.connect(database_url()) as snapshot:
        snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        seen = snapshot.execute("SELECT count(*) FROM executions_execution").fetchone()[0]
        sampler = Sampler(team.id)
        sampler.start()
        try:
            run_in_threads(
                [lambda: execution_admit(team=team, workflow=workflow)] * FLOOD, threads=8
            )
            done = Execution.objects.filter(workflow=workflow, status=Status.COMPLETED)
            wait_for(lambda: done.count() == FLOOD, timeout=60)
        finally:
            sampler.stop()
        # The snapshot was held throughout: it still sees the table as before the flood.
        assert snapshot.execute("SELECT count(*) FROM executions_execution").fetchone()[0] == seen
        snapshot.rollback()

    executions = list(Execution.objects.filter(workflow=workflow))
    completions = sorted(e.completed_at for e in executions)
    # How long each promoted execution waited after the completion that freed its slot.
    delays = [
        (e.promoted_at - max(c for c in completions if c <= e.promoted_at)).total_seconds()
        for e in executions
        if e.promoted_at is not None
    ]
    print(
        f"\n[faults] RR snapshot held through {FLOOD} admissions: {len(delays)} promoted, "
        f"promotion after completion p50 {statistics.median(delays) * 1000:.0f} ms, "
        f"max {max(delays) * 1000:.0f} ms; max slot holders {sampler.max_per_workflow[workflow.id]}"
    )
    assert sampler.samples > 0 and sampler.max_per_workflow[workflow.id] <= LIMIT
    assert len(delays) >= FLOOD - LIMIT - 8  # most waited in the queue
    # Promotion followed the completions' commits: none waited for the backup poller.
    assert statistics.median(delays) < ENGINE["queue_poll_interval"] / 4
    assert max(delays) < ENGINE["queue_poll_interval"]
