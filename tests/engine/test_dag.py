from __future__ import annotations

from collections.abc import Callable

from executions.models import StepExecution
from tests.engine.conftest import run, wait_terminal
from workflows.models import WorkflowDefinition

DAG = """
name: dag
steps:
  - name: start
    action: test/echo
    params: {value: 1}
  - name: left
    action: test/sleep
    params: {seconds: 1}
    depends_on: [start]
  - name: right
    action: test/sleep
    params: {seconds: 1}
    depends_on: [start]
  - name: join
    action: test/echo
    params:
      total: "{{ steps['start'].output.value + 1 }}"
    depends_on: [left, right]
"""


def test_parallel_branches_overlap_and_the_join_sees_outputs(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine()
    execution = wait_terminal(run(apply(DAG)))
    assert execution.status == "completed", execution.error
    steps = {s.name: s for s in StepExecution.objects.filter(execution=execution)}
    left, right = steps["left"], steps["right"]
    assert left.started_at < right.completed_at and right.started_at < left.completed_at
    assert steps["join"].started_at >= max(left.completed_at, right.completed_at)
    assert steps["join"].output == {"total": 2}
