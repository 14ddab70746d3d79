"""django-q2 stores a task's dotted path in its queue: a task queued by the previous release,
which named `executions.worker.*`, still runs after the upgrade (executions/worker.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from django_q.models import OrmQ, Task
from django_q.tasks import async_task

from executions.models import TERMINAL, Status
from tests.factories import ExecutionFactory
from workflows.models import WorkflowDefinition

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OLD_PATH = "executions.worker.run_execution"


def test_a_start_queued_under_the_previous_task_path_still_runs_the_execution(
    engine: Callable[..., object], team, make_workflow: Callable[..., WorkflowDefinition]
) -> None:
    # What the previous release wrote on admission: a pending execution, and in django-q2's ORM
    # queue a signed task naming the old path.
    execution = ExecutionFactory(workflow=make_workflow(team))
    async_task(OLD_PATH, str(execution.id), group="executions")
    (queued,) = OrmQ.objects.all()
    assert queued.func() == OLD_PATH, (
        "the queued row does not name the old path: the test no longer tests the upgrade"
    )
    engine()
    # The cluster records every task it ran, by path; the reaper would also start an execution
    # whose task is lost, so the execution completing alone would prove nothing.
    deadline = time.monotonic() + 30
    while not (ran := Task.objects.filter(func=OLD_PATH).first()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ran is not None and ran.success, (
        f"a task queued as {OLD_PATH} did not run: keep executions/worker.py (the previous "
        "release's task paths) importable and handing over to engine.tasks for one release"
        + ("" if ran is None else f"; it failed with {ran.result}")
    )
    while execution.status not in TERMINAL and time.monotonic() < deadline:
        time.sleep(0.1)
        execution.refresh_from_db()
    assert execution.status == Status.COMPLETED
