"""Model-based test of step-scope limits (docs/limits.md, Step scope): random interleavings of
admissions, claims, hand-offs (a worker settling limited attempts and claiming at once what the
freed units let in: engine.runner.settle_then_claim, the worker's own path), finishes, cancels and
lost leases (the reaper's pass), against the real database, checked after every step against a
plain Python model:
steps of 1 and 2 units over two named limits, one step listing both.

Invariants: every step's status and owner are the model's; the units held of every limit stay
within its max; each claim takes exactly the steps the rules give it (FIFO, and a step that
does not fit closes its limits for the steps behind it); and after a hand-off that had room
left, no waiting step fits (no lost wake-up). Mutants show that the last two can fail: a claim
that reads one unit more of room, a hand-off that never claims."""

from __future__ import annotations

import contextlib
import itertools
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.db import connection
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from engine import dispatch, orchestrator, reaper, runner
from executions.models import Execution, StepExecution, StepStatus
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_cancel
from teams.services import named_limit_set, team_create
from workflows.services import workflow_apply

ALPHA, BETA = "alpha", "beta"
# workflow: the units its one step holds of each named limit.
STEPS = {"single": {ALPHA: 1}, "double": {ALPHA: 2, BETA: 1}, "narrow": {BETA: 1}}
OWNERS = ("worker-a", "worker-b")
_slugs = itertools.count()
MUTANT_EXAMPLES = 100


@dataclass
class Step:
    id: int
    execution_id: uuid.UUID
    units: dict[str, int]
    status: str = StepStatus.WAITING
    owner: str = ""
    claim: dispatch.Claim | None = None
    cancelled: bool = False  # its execution was cancelled


def _workflow(name: str, units: dict[str, int]) -> str:
    listed = ", ".join(f"{{name: {limit}, units: {n}}}" for limit, n in sorted(units.items()))
    return f"name: {name}\nsteps:\n  - name: only\n    action: test/noop\n    limits: [{listed}]\n"


class StepLimitsModel(RuleBasedStateMachine):
    check_claims = True  # compare each claim with the model's (off against a mutant)

    @initialize(alpha=st.integers(min_value=2, max_value=3), beta=st.integers(1, 2))
    def start(self, alpha: int, beta: int) -> None:
        # A claim takes the due steps of every team: none of an earlier example's may be left.
        Execution.objects.all().delete()
        self.team = team_create(slug=f"steps-{next(_slugs)}")
        self.max = {ALPHA: alpha, BETA: beta}
        self.limit_ids = {
            name: named_limit_set(team=self.team, name=name, max=most)[0].id
            for name, most in self.max.items()
        }
        self.workflows = {
            name: workflow_apply(team=self.team, content=_workflow(name, units)).workflow
            for name, units in STEPS.items()
        }
        self.steps: list[Step] = []  # in creation order: the claim's FIFO
        self.room_left_after_hand_off = 0

    # The model ---------------------------------------------------------------------------
    def held(self, limit: str) -> int:
        return sum(s.units.get(limit, 0) for s in self.steps if s.status == StepStatus.RUNNING)

    def expected_claims(self, room: float) -> list[Step]:
        """mantle_claim_limited's choice: FIFO; a step that does not fit closes the limits it
        lacks room in (or that are closed) for every step behind it."""
        free = {limit: self.max[limit] - self.held(limit) for limit in self.max}
        closed: set[str] = set()
        taken = []
        for step in self.steps:
            if step.status != StepStatus.WAITING or len(taken) >= room:
                continue
            short = {n for n, units in step.units.items() if n in closed or free[n] < units}
            if short:
                closed |= short
                continue
            taken.append(step)
            for limit, units in step.units.items():
                free[limit] -= units
        return taken

    def claimed(self, claims: list[dispatch.Claim], owner: str, room: float) -> None:
        expected = self.expected_claims(room)
        by_id = {step.id: step for step in self.steps}
        if self.check_claims:
            assert sorted(c.id for c in claims) == sorted(s.id for s in expected), (
                f"claimed {[c.id for c in claims]}, the rules give {[s.id for s in expected]}"
            )
        for claim in claims:
            step = by_id[claim.id]
            step.status, step.owner, step.claim = StepStatus.RUNNING, owner, claim

    def running(self) -> list[Step]:
        return [s for s in self.steps if s.status == StepStatus.RUNNING]

    def ended(self, step: Step, status: str) -> None:
        step.status, step.owner = status, ""

    # Rules -------------------------------------------------------------------------------
    @rule(workflow=st.sampled_from(sorted(STEPS)))
    def admit(self, workflow: str) -> None:
        definition = self.workflows[workflow]
        execution = execution_admit(team=self.team, workflow=definition).execution
        orchestrator.executions_start(10, owner="starter", room=0)
        row = StepExecution.objects.get(execution=execution)
        assert row.status == StepStatus.WAITING
        self.steps.append(Step(row.id, execution.id, STEPS[workflow]))
        self.room_left_after_hand_off = 0  # a new waiting step: its own NOTIFY's to claim

    @rule(owner=st.sampled_from(OWNERS), room=st.integers(min_value=1, max_value=3))
    def claim(self, owner: str, room: int) -> None:
        self.claimed(dispatch.steps_claim_limited(owner, room), owner, room)
        self.room_left_after_hand_off = 0

    @precondition(lambda self: self.running())
    @rule(
        picks=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=3),
        outcome=st.sampled_from([StepStatus.COMPLETED, StepStatus.COMPLETED, StepStatus.FAILED]),
        room=st.integers(min_value=1, max_value=4),
    )
    def hand_off(self, picks: list[int], outcome: str, room: int) -> None:
        """One worker settles some of its attempts and claims with the room they free (and
        `room` more): engine.worker's path for attempts holding step-scope limits."""
        owner = self.running()[picks[0] % len(self.running())].owner
        mine = [s for s in self.running() if s.owner == owner]
        batch = list({id(s): s for s in (mine[p % len(mine)] for p in picks)}.values())
        settlements = [
            runner.Settlement(
                s.claim, owner, runner.Outcome(StepStatus.CANCELLED if s.cancelled else outcome)
            )
            for s in batch
            if s.claim is not None
        ]
        settled, claims, unadvanced = runner.settle_then_claim(settlements, owner, room)
        assert settled == {s.id for s in batch}
        orchestrator.advance_many(unadvanced)  # the worker's next step, on a settle thread
        for step in batch:
            self.ended(step, StepStatus.CANCELLED if step.cancelled else outcome)
        self.claimed(claims, owner, room)
        self.room_left_after_hand_off = room - len(claims)

    def cancellable(self) -> list[Step]:
        return [s for s in self.steps if not s.cancelled and s.status in ("waiting", "running")]

    @precondition(lambda self: self.cancellable())
    @rule(pick=st.integers(min_value=0, max_value=20))
    def cancel(self, pick: int) -> None:
        """A waiting step leaves the wait and frees nothing; a running one holds its units
        until its worker settles it (its next heartbeat)."""
        live = self.cancellable()
        step = live[pick % len(live)]
        execution_cancel(step.execution_id)
        step.cancelled = True
        if step.status == StepStatus.WAITING:
            step.status = StepStatus.CANCELLED
        self.room_left_after_hand_off = 0

    @precondition(lambda self: self.running())
    @rule(pick=st.integers(min_value=0, max_value=20))
    def lose_lease(self, pick: int) -> None:
        """The worker stops heartbeating: the reaper ends the attempt (no retry: failed), which
        frees its units; the old owner's late settle then changes nothing."""
        step = self.running()[pick % len(self.running())]
        StepExecution.objects.filter(id=step.id).update(
            lease_expires_at=StepExecution.objects.get(id=step.id).started_at
        )
        assert reaper.expire_leases() == 1
        stale = step.claim
        self.ended(step, StepStatus.FAILED)  # "lease expired", whatever its execution's status
        assert stale is not None
        late = runner.Settlement(stale, step.owner or "gone", runner.Outcome(StepStatus.COMPLETED))
        assert runner.settle([late]) == set()
        self.room_left_after_hand_off = 0

    # Invariants --------------------------------------------------------------------------
    @invariant()
    def database_matches_the_model(self) -> None:
        if not hasattr(self, "steps"):
            return
        rows = dict(
            StepExecution.objects.filter(id__in=[s.id for s in self.steps]).values_list(
                "id", "status"
            )
        )
        for step in self.steps:
            assert rows[step.id] == step.status, f"step {step.id}: {rows[step.id]} != {step}"

    @invariant()
    def units_in_use_stay_within_every_limit(self) -> None:
        if not hasattr(self, "steps"):
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT h.id, sum(h.units) FROM executions_stepexecution s"
                " CROSS JOIN LATERAL unnest(s.limit_ids, s.limit_units) AS h(id, units)"
                " WHERE s.status = 'running' GROUP BY h.id"
            )
            held = dict(cursor.fetchall())
        for name, limit_id in self.limit_ids.items():
            assert held.get(limit_id, 0) <= self.max[name], f"{name}: {held} > {self.max}"

    @invariant()
    def no_waiting_step_fits_after_a_hand_off_with_room(self) -> None:
        if not hasattr(self, "steps") or self.room_left_after_hand_off <= 0:
            return
        fits = self.expected_claims(math.inf)
        assert not fits, f"after a hand-off with room, steps {[s.id for s in fits]} still wait"


class StepLimitsModelAgainstAMutant(StepLimitsModel):
    """Only the invariants judge: the claim's comparison with the model is off."""

    check_claims = False


@pytest.mark.django_db(transaction=True)
def test_step_limits_hold_in_random_interleavings(mantle_config):
    run_state_machine_as_test(
        StepLimitsModel,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )


@contextlib.contextmanager
def claim_mutated(what: str, replacement: str) -> Iterator[None]:
    """mantle_claim_limited as installed, with `what` replaced; the original afterwards."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('mantle_claim_limited'::regproc)")
        original = cursor.fetchone()[0]
        assert original.count(what) == 1
        cursor.execute(original.replace(what, replacement))
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(original)


MUTANTS = {
    # The claim finds one unit more of room than it counted in every limit.
    "claim: one unit over": "units_in_use_stay_within_every_limit",
    # The hand-off settles but never claims (a lost wake-up).
    "hand-off: no claim": "no_waiting_step_fits_after_a_hand_off_with_room",
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
@pytest.mark.django_db(transaction=True)
def test_the_step_model_catches_a_mutant(mantle_config, monkeypatch, mutant):
    catcher = MUTANTS[mutant]
    with contextlib.ExitStack() as stack:
        if mutant.startswith("claim"):
            room = "(_free ->> u.id::text)::int < u.units"
            stack.enter_context(claim_mutated(room, "(_free ->> u.id::text)::int + 1 < u.units"))
        else:
            monkeypatch.setattr(runner, "steps_claim", lambda claim, owner, limit: [])
        with pytest.raises(AssertionError) as caught:
            run_state_machine_as_test(
                StepLimitsModelAgainstAMutant,
                settings=settings(
                    max_examples=MUTANT_EXAMPLES,
                    stateful_step_count=30,
                    deadline=None,
                    derandomize=True,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                ),
            )
    print(f"\n{mutant}: {catcher} {str(caught.value).splitlines()[0][:120]}")
    assert catcher in {entry.name for entry in caught.traceback}, caught.value
