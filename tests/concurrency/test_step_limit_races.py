"""Step-scope limits under concurrency (docs/limits.md, Step scope): 400 executions of two teams
whose steps share one global limit of 5 units (steps of 1 and of 2 units), claimed by two worker
processes (each the claimer of its own serve, so their claims race) while completions free
units: the units held, summed from the running rows on a connection of its own, stay within 5 in
every sample and reach it; every step completes. The same run with the claim's locks patched out
breaks the limit, which the same sampler catches."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from executions.models import Execution, StepExecution
from executions.services.admission import execution_admit
from teams.models import NamedLimit
from teams.services import named_limit_set, team_create
from tests.concurrency.harness import UnitSampler
from tests.processes import Cluster
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)

UNITS, EXECUTIONS = 5, 400

# Two steps at once per execution: one of 1 unit, one of 2.
SHARED = """
name: sync
steps:
  - name: small
    action: test/sleep
    limits: [shared-api]
    params: {seconds: 0.02}
  - name: large
    action: test/sleep
    limits: [{name: shared-api, units: 2}]
    params: {seconds: 0.02}
"""


def two_teams() -> tuple[list[WorkflowDefinition], NamedLimit]:
    limit, _ = named_limit_set(team=None, name="shared-api", max=UNITS)
    workflows = [
        workflow_apply(team=team_create(slug=f"t-{uuid.uuid4().hex[:8]}"), content=SHARED).workflow
        for _ in range(2)
    ]
    return workflows, limit


def race(engine: Callable[..., Cluster]) -> tuple[UnitSampler, list[Execution]]:
    """Admit 400 executions over the two teams, two worker processes claiming; sample the units
    held until every execution ends."""
    workflows, limit = two_teams()
    sampler = UnitSampler(limit.id)
    sampler.start()
    try:
        executions = [
            execution_admit(team=w.team, workflow=w, inputs={}).execution
            for i in range(EXECUTIONS)
            for w in [workflows[i % 2]]
        ]
        # Two serves of one worker each: each worker holds its own serve's claimer role.
        engine(workers=1, slots=20)
        engine(workers=1, slots=20)
        deadline = time.monotonic() + 240
        ids = [execution.id for execution in executions]
        while Execution.objects.filter(id__in=ids, status__in=["pending", "running"]).exists():
            assert time.monotonic() < deadline, "the executions did not end in time"
            time.sleep(0.2)
    finally:
        sampler.stop()
    return sampler, executions


def test_units_of_a_shared_limit_stay_within_it_in_every_sample(engine) -> None:
    sampler, executions = race(engine)
    print(f"{sampler.samples} samples, most units held at once {sampler.most}")
    assert sampler.samples > 1000
    assert sampler.most == UNITS
    steps = StepExecution.objects.filter(execution__in=executions)
    assert steps.count() == 2 * EXECUTIONS
    assert set(steps.values_list("status", flat=True)) == {"completed"}
    assert set(
        Execution.objects.filter(id__in=[e.id for e in executions]).values_list("status", flat=True)
    ) == {"completed"}


def test_without_the_claims_locks_the_same_race_breaks_the_limit(
    engine, claim_without_locks: None
) -> None:
    sampler, _ = race(engine)
    print(f"{sampler.samples} samples, most units held at once {sampler.most}")
    assert sampler.most > UNITS
