"""A worker lost between ending completed attempts and advancing their executions (the hand-off
path, engine/runner.py settle_freeing: the advance runs after the hand-off claim): the reaper's
pass for stalled executions advances them (docs/performance.md, Step-scope hand-off)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings

from engine import orchestrator, reaper, runner
from executions.models import Execution, Status, StepExecution, StepStatus
from tests.engine.conftest import run
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db(transaction=True)

TWO_STEPS = """\
name: two
steps:
  - name: first
    action: test/noop
  - name: second
    action: test/noop
    depends_on: [first]
"""


def test_an_execution_left_unadvanced_by_a_lost_worker_is_advanced_by_the_reaper(
    apply: Callable[..., WorkflowDefinition],
) -> None:
    execution = run(apply(TWO_STEPS))
    started, claims = orchestrator.executions_start(10, owner="lost", room=1)
    assert started == 1 and [claim.execution_id for claim in claims] == [execution.id]
    settled, unadvanced = runner.settle_freeing(
        [runner.Settlement(claims[0], "lost", runner.Outcome(StepStatus.COMPLETED))]
    )
    assert settled == {claims[0].id} and unadvanced == {execution.id}
    # The worker is gone before runner.advance: the first step ended, the second never made.
    assert not StepExecution.objects.filter(execution=execution, name="second").exists()
    assert reaper.advance_stalled() == 0  # not before a lease has passed since its start
    lease = timedelta(seconds=settings.MANTLE.engine.step_lease)
    execution.refresh_from_db()
    assert execution.status == Status.RUNNING and execution.started_at is not None
    Execution.objects.filter(id=execution.id).update(started_at=execution.started_at - lease)
    assert reaper.advance_stalled() == 1
    second = StepExecution.objects.get(execution=execution, name="second")
    assert second.status == StepStatus.PENDING
    assert reaper.advance_stalled() == 0  # advanced: no longer stalled
