"""Self-fencing (docs/operations.md, Database failover): a step worker that cannot renew an
attempt's lease stops the attempt before the lease can run out, so the attempt the reaper starts
after the lease never runs beside it."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg

from executions.models import StepExecution
from tests.engine.conftest import run, wait_for
from tests.processes import database_url
from workflows.models import WorkflowDefinition

LEASE = 10.0  # seconds: the worker stops the attempt 1 s before it can run out
LONG = "name: long\nsteps:\n  - name: only\n    action: test/sleep\n    params: {seconds: 60}\n"


def test_an_attempt_whose_lease_cannot_be_renewed_stops_before_the_lease_runs_out(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    cluster = engine(workers=1, env={"MANTLE_ENGINE_STEP_LEASE": str(LEASE)})
    execution = run(apply(LONG))
    step = wait_for(
        lambda: StepExecution.objects.filter(execution=execution, status="running").first(),
        timeout=30,
    )
    assert isinstance(step, StepExecution)
    log = cluster.log  # type: ignore[attr-defined]
    # The step's row held by another transaction: the worker's renewal (an UPDATE of it) waits
    # behind it, as it waits for a database it cannot reach.
    with psycopg.connect(database_url(), autocommit=False) as holder:
        holder.execute("SELECT 1 FROM executions_stepexecution WHERE id = %s FOR UPDATE", [step.id])
        held_at = time.monotonic()
        wait_for(lambda: "lease not renewed in time" in log.read_text(), timeout=2 * LEASE)
        stopped_after = time.monotonic() - held_at
        wait_for(lambda: f"step {step.id} attempt 1: given up by" in log.read_text(), timeout=5)
        holder.rollback()
    # Stopped while its lease still ran (its last renewal was before the row was held).
    assert stopped_after < LEASE
