"""One team's fan-outs never hold back another team's start (docs/performance.md, Claims),
against real step-worker processes: team A fans out no-ops and sleeps until thousands of its
branches wait; team B's one no-op, admitted then, starts before all but a claim's worth of
them and ends while A's backlog is still there. (Its latency is bench figure 10.)"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from executions.models import TERMINAL, Execution, StepExecution
from teams.services import team_create
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.processes import Cluster
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

WORKERS, SLOTS = 2, 50
BRANCHES = 3_000
BACKLOG = 1_500  # A's pending branches before B is admitted


def fanout(name: str, action: str, params: str = "{}") -> str:
    return f"""
name: {name}
steps:
  - name: each
    action: {action}
    for_each: {list(range(BRANCHES))}
    params: {params}
"""


def pending_branches(execution_ids: list[uuid.UUID]) -> set[int]:
    return set(
        StepExecution.objects.filter(
            execution_id__in=execution_ids, status="pending", fanout_index__isnull=False
        ).values_list("id", flat=True)
    )


def test_another_teams_step_starts_before_one_teams_backlog_of_branches(
    engine: Callable[..., Cluster], apply: Callable[..., WorkflowDefinition]
) -> None:
    engine(workers=WORKERS, slots=SLOTS)
    noops = [apply(fanout(f"noops-{n}", "test/noop")) for n in range(3)]
    sleeps = [apply(fanout(f"sleeps-{n}", "test/sleep", "{seconds: 1}")) for n in range(2)]
    flood = [run(workflow).id for workflow in noops + sleeps]
    wait_for(lambda: len(pending_branches(flood)) >= BACKLOG, timeout=120)
    backlog = pending_branches(flood)

    other = team_create(slug=f"b-{uuid.uuid4().hex[:8]}")
    noop = workflow_apply(
        team=other, content="name: one\nsteps:\n  - name: only\n    action: test/noop\n"
    ).workflow
    execution = wait_terminal(run(noop), timeout=60)

    assert execution.status == "completed", execution.error
    assert Execution.objects.filter(id__in=flood).exclude(status__in=TERMINAL).exists()
    started = StepExecution.objects.get(execution=execution).started_at
    ahead = StepExecution.objects.filter(id__in=backlog, started_at__lt=started).count()
    print(f"{len(backlog):,} of A's branches waiting; {ahead} of them started before B's step")
    # At most one claim of each worker was under way when B was admitted.
    assert ahead <= WORKERS * SLOTS
