"""Model-based test: random interleavings of admit / force / complete / fail / cancel /
change-limit / poller against the real database, checked after every step against a plain Python
model of the rules in CONTRACT §4."""

from __future__ import annotations

import itertools
import math
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from executions.models import Execution, Status
from executions.services import promotion
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.lifecycle import execution_cancel, execution_finish
from teams.services import team_create, team_set_limit
from teams.signals import loosens
from tests.factories import workflow_yaml
from workflows.services import workflow_apply

WORKFLOWS = ("steady", "strict")  # strict rejects when full; steady queues
_slugs = itertools.count()


@dataclass
class Run:
    id: uuid.UUID
    workflow: str
    status: str
    forced: bool
    blocked_by: str | None


class LimitsModel(RuleBasedStateMachine):
    @initialize(
        team_limit=st.integers(min_value=1, max_value=3),
        steady=st.integers(min_value=0, max_value=2),
        strict=st.integers(min_value=1, max_value=2),
    )
    def start(self, team_limit: int, steady: int, strict: int) -> None:
        self.team = team_create(slug=f"model-{next(_slugs)}", max_concurrent_executions=team_limit)
        self.team_limit = team_limit
        self.limits = {"steady": steady, "strict": strict}
        self.workflows = {name: self._apply(name) for name in WORKFLOWS}
        self.runs: list[Run] = []  # in admission order
        self.lowered = False
        self.promotion_owed = False  # a finisher died between its commit and its promotion

    def _apply(self, name: str):  # type: ignore[no-untyped-def]
        on_limit = "reject" if name == "strict" else "queue"
        content = workflow_yaml(name, limit=self.limits[name], on_limit=on_limit)
        return workflow_apply(team=self.team, content=content).workflow

    # The model ---------------------------------------------------------------------------
    def holders(self, workflow: str | None = None) -> int:
        return sum(
            r.status in (Status.PENDING, Status.RUNNING)
            and (workflow is None or r.workflow == workflow)
            for r in self.runs
        )

    def free(self, workflow: str | None = None) -> float:
        limit = self.team_limit if workflow is None else self.limits[workflow]
        return math.inf if limit == 0 else limit - self.holders(workflow)

    def expected_blocker(self, workflow: str) -> str | None:
        queued = [r for r in self.runs if r.status == Status.QUEUED]
        if self.free() <= 0 or any(r.blocked_by == "team" for r in queued):
            return "team"
        if self.free(workflow) <= 0 or any(r.workflow == workflow for r in queued):
            return "workflow"
        return None

    def promote(self) -> None:
        self.promotion_owed = False
        for run in self.runs:
            if run.status != Status.QUEUED or self.free() <= 0:
                continue
            if self.free(run.workflow) > 0:
                run.status, run.blocked_by = Status.PENDING, None
        label = "team" if self.free() <= 0 else "workflow"
        for run in self.runs:
            if run.status == Status.QUEUED:
                run.blocked_by = label

    def live(self, statuses: tuple[str, ...]) -> list[Run]:
        return [r for r in self.runs if r.status in statuses]

    # The rules ----------------------------------------------------------------------------
    @rule(workflow=st.sampled_from(WORKFLOWS))
    def admit(self, workflow: str) -> None:
        blocker = self.expected_blocker(workflow)
        try:
            admission = execution_admit(team=self.team, workflow=self.workflows[workflow])
        except ConcurrencyLimitExceeded as exc:
            assert workflow == "strict" and blocker == exc.scope
            return
        assert admission.execution.blocked_by == blocker
        assert not (workflow == "strict" and blocker), "a rejecting workflow queued"
        status = Status.QUEUED if blocker else Status.PENDING
        self.runs.append(Run(admission.execution.id, workflow, status, False, blocker))

    @rule(workflow=st.sampled_from(WORKFLOWS))
    def admit_forced(self, workflow: str) -> None:
        execution = execution_admit(
            team=self.team, workflow=self.workflows[workflow], force=True
        ).execution
        self.runs.append(Run(execution.id, workflow, Status.PENDING, True, None))

    @precondition(lambda self: self.live((Status.PENDING, Status.RUNNING)))
    @rule(
        pick=st.integers(min_value=0, max_value=50),
        outcome=st.sampled_from([Status.COMPLETED, Status.FAILED, Status.TIMED_OUT]),
    )
    def finish(self, pick: int, outcome: str) -> None:
        holders = self.live((Status.PENDING, Status.RUNNING))
        run = holders[pick % len(holders)]
        assert execution_finish(run.id, status=outcome)
        run.status, run.blocked_by = outcome, None
        self.promote()

    @precondition(lambda self: self.live((Status.PENDING, Status.RUNNING)))
    @rule(pick=st.integers(min_value=0, max_value=50))
    def finish_then_die_before_promotion(self, pick: int) -> None:
        holders = self.live((Status.PENDING, Status.RUNNING))
        run = holders[pick % len(holders)]
        # The terminal state is committed; the process dies before its on-commit promotion.
        Execution.objects.filter(id=run.id).update(status=Status.COMPLETED, blocked_by=None)
        run.status, run.blocked_by = Status.COMPLETED, None
        self.promotion_owed = True

    @precondition(lambda self: self.live((Status.QUEUED, Status.PENDING, Status.RUNNING)))
    @rule(pick=st.integers(min_value=0, max_value=50))
    def cancel(self, pick: int) -> None:
        live = self.live((Status.QUEUED, Status.PENDING, Status.RUNNING))
        run = live[pick % len(live)]
        execution_cancel(run.id)
        run.status, run.blocked_by = Status.CANCELLED, None
        self.promote()

    @rule(limit=st.one_of(st.none(), st.integers(min_value=0, max_value=4)))
    def change_team_limit(self, limit: int | None) -> None:
        old = self.team_limit
        team_set_limit(team=self.team, max_concurrent_executions=limit)
        self.team_limit = 0 if limit is None else limit  # the test config's default is 0
        self.lowered |= not loosens(old, self.team_limit) and old != self.team_limit
        if loosens(old, self.team_limit):
            self.promote()

    @rule(workflow=st.sampled_from(WORKFLOWS), limit=st.integers(min_value=0, max_value=3))
    def change_workflow_limit(self, workflow: str, limit: int) -> None:
        old, self.limits[workflow] = self.limits[workflow], limit
        self.lowered |= not loosens(old, limit) and old != limit
        self._apply(workflow)
        if loosens(old, limit):
            self.promote()

    @rule()
    def poller(self) -> None:
        promotion.queue_promote_all(trigger="poller")
        self.promote()

    # The checks ---------------------------------------------------------------------------
    @invariant()
    def database_matches_the_model(self) -> None:
        stored = dict(Execution.objects.filter(team=self.team).values_list("id", "status"))
        assert stored == {r.id: r.status for r in self.runs}
        labels = dict(
            Execution.objects.filter(team=self.team, status=Status.QUEUED).values_list(
                "id", "blocked_by"
            )
        )
        assert labels == {r.id: r.blocked_by for r in self.runs if r.status == Status.QUEUED}

    @invariant()
    def holders_stay_within_limits_except_forced(self) -> None:
        if self.lowered:  # lowering a limit never evicts: holders may exceed it until they finish
            return
        holders = self.live((Status.PENDING, Status.RUNNING))
        if self.team_limit:
            assert sum(not r.forced for r in holders) <= self.team_limit
        for name, limit in self.limits.items():
            if limit:
                assert sum(not r.forced and r.workflow == name for r in holders) <= limit

    @invariant()
    def nothing_waits_while_its_slots_are_free(self) -> None:
        if self.promotion_owed:  # until the poller (or the next promotion) runs
            return
        for run in self.live((Status.QUEUED,)):
            assert self.free() <= 0 or self.free(run.workflow) <= 0, run


@pytest.mark.django_db(transaction=True)
def test_limits_hold_in_random_interleavings(mantle_config):
    mantle_config("engine", max_concurrent_executions_per_team=0)
    run_state_machine_as_test(
        LimitsModel,
        settings=settings(
            max_examples=100,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,  # the same interleavings on every CI run
            suppress_health_check=list(HealthCheck),
        ),
    )
