"""The row lock order of docs/architecture.md: a transaction that writes an execution's steps and
then its row takes the row first. A cancel holds the execution's row and then ends its steps; a
settle that wrote a step first and then waited for the row would deadlock with it (seen in CI:
a cancel of a running fan-out against a worker settling its branches)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection, transaction

from engine import dispatch, runner
from executions.models import Execution, StepExecution, StepStatus
from executions.services.lifecycle import execution_start
from tests.engine.conftest import run, wait_for
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db(transaction=True)

ONE_STEP = "name: one\nsteps:\n  - name: only\n    action: test/noop\n"


def blocked_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        # Within a transaction the activity is read once, unless its snapshot is cleared.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])


def test_a_settle_waits_for_the_row_of_an_execution_being_cancelled_holding_no_step(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    execution = run(apply(ONE_STEP))
    assert execution_start(execution.id)
    runner.advance({execution.id})
    [claim] = dispatch.steps_claim("worker-a", 1)
    settled: list[set[int]] = []

    def settle() -> None:
        try:
            outcome = runner.Outcome(StepStatus.COMPLETED)
            settled.append(runner.settle([runner.Settlement(claim, "worker-a", outcome)]))
        finally:
            connection.close()

    settler = threading.Thread(target=settle)
    # What a cancel does, in its order: the execution's row, then its steps' rows.
    with transaction.atomic():
        Execution.objects.select_for_update().get(id=execution.id)
        settler.start()
        wait_for(blocked_on_a_lock, timeout=10)
        # The settle waits for the row; it must not hold the step meanwhile. Holding it, this
        # update waits for the settle, which waits for this transaction: PostgreSQL's deadlock
        # detector ends one of them.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '10s'")
        assert StepExecution.objects.filter(id=claim.id).update(error="") == 1
    settler.join(timeout=20)
    assert settled == [{claim.id}]
    execution.refresh_from_db()
    assert execution.status == "completed"
