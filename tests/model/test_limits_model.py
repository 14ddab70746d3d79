"""Model-based test: random interleavings of admit / force / complete / fail / cancel /
change-limit / clock / poller against the real database, checked after every step against a plain
Python model of the rules in CONTRACT §4 and §9 (keys, fair promotion, priority, the strategies,
max_queued and queue_timeout)."""

from __future__ import annotations

import heapq
import itertools
import math
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db.models import F
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

from executions.models import SLOT_HOLDING, Execution, Status
from executions.services import promotion
from executions.services.admission import (
    QUEUE_FULL,
    ConcurrencyLimitExceeded,
    execution_admit,
)
from executions.services.lifecycle import execution_cancel, execution_finish
from teams.services import team_create, team_set_limit
from teams.signals import loosens
from tests.factories import workflow_yaml
from workflows.services import workflow_apply

# name: (on_limit, keyed). steady and keyed queue, strict rejects, latest keeps the latest queued
# of a key, supersede cancels the oldest holder of its key.
WORKFLOWS = {
    "steady": ("queue", False),
    "strict": ("reject", False),
    "keyed": ("queue", True),
    "latest": ("keep_latest", True),
    "supersede": ("cancel_running", True),
}
KEYS = ("a", "b", "c")
QUEUE_TIMEOUT = timedelta(minutes=1)  # steady's and keyed's; the test's own run time never is
CLOCK_STEP = QUEUE_TIMEOUT  # a step expires what was queued before it, not what queues after
_slugs = itertools.count()


@dataclass
class Run:
    id: uuid.UUID
    workflow: str
    key: str
    priority: int
    status: str
    forced: bool
    blocked_by: str | None
    waited: timedelta = timedelta()  # queued, by the model's clock
    promoted: int | None = None  # the promotion that took it: promoted_at's order
    expired: bool = False  # ended by queue_timeout

    def outranks(self, other: Run, order: dict[uuid.UUID, int]) -> bool:
        """Ahead of `other` in a key's queue: higher priority, then older."""
        return (self.priority, -order[self.id]) > (other.priority, -order[other.id])


class LimitsModel(RuleBasedStateMachine):
    @initialize(
        team_limit=st.sampled_from([0, 0, 2, 3]),  # 0: unlimited, often: the other limits bite
        limits=st.fixed_dictionaries(
            {
                "steady": st.integers(min_value=0, max_value=2),
                "strict": st.integers(min_value=1, max_value=2),
                "keyed": st.integers(min_value=0, max_value=3),
                "latest": st.integers(min_value=0, max_value=2),
                "supersede": st.integers(min_value=0, max_value=2),
            }
        ),
        per_key=st.integers(min_value=1, max_value=2),
        max_queued=st.fixed_dictionaries(
            {
                "steady": st.integers(min_value=0, max_value=2),
                "keyed": st.integers(min_value=1, max_value=2),
            }
        ),
    )
    def start(
        self, team_limit: int, limits: dict[str, int], per_key: int, max_queued: dict[str, int]
    ) -> None:
        self.team = team_create(
            slug=f"model-{next(_slugs)}", max_concurrent_executions=team_limit or None
        )
        self.team_limit = team_limit
        self.limits = limits
        # keep_latest and cancel_running with one slot a key: the strategies at their sharpest.
        self.per_key = {"keyed": per_key, "latest": 1, "supersede": 1}
        self.max_queued = max_queued
        self.workflows = {name: self._apply(name) for name in WORKFLOWS}
        self.runs: list[Run] = []  # in admission order: created_at's
        self.lowered = False
        self.promotion_owed = False  # a finisher died between its commit and its promotion
        self.promotions = 0
        # Workflows where cancel_running superseded a forced holder: one in, one out, so the key
        # and the workflow a forced admission put over their limits stay over them (their
        # counts are not checked again; database_matches_the_model still checks every status).
        self.over: set[str] = set()

    def _apply(self, name: str):  # type: ignore[no-untyped-def]
        on_limit, keyed = WORKFLOWS[name]
        extra = ""
        if keyed:
            extra += (
                'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'
            )
            extra += f"max_parallel_per_key: {self.per_key[name]}\n"
        if name in self.max_queued:
            extra += f"max_queued: {self.max_queued[name]}\nqueue_timeout: 1m\n"
        content = workflow_yaml(name, limit=self.limits[name], on_limit=on_limit, extra=extra)
        return workflow_apply(team=self.team, content=content).workflow

    # The model ---------------------------------------------------------------------------
    def live(
        self, statuses: tuple[str, ...], workflow: str | None = None, key: str | None = None
    ) -> list[Run]:
        return [
            r
            for r in self.runs
            if r.status in statuses
            and (workflow is None or r.workflow == workflow)
            and (key is None or r.key == key)
        ]

    def free(self, workflow: str | None = None) -> float:
        limit = self.team_limit if workflow is None else self.limits[workflow]
        return math.inf if limit == 0 else max(0, limit - len(self.live(SLOT_HOLDING, workflow)))

    def key_full(self, workflow: str, key: str) -> bool:
        per_key = self.per_key.get(workflow, 0)
        return per_key > 0 and len(self.live(SLOT_HOLDING, workflow, key)) >= per_key

    def decide(self, workflow: str, key: str) -> tuple[str | None, Run | None, str | None]:
        """mantle_admit's decision: (what blocks the newcomer, the run it supersedes, the scope
        that rejects it)."""
        on_limit, _ = WORKFLOWS[workflow]
        queued = self.live((Status.QUEUED,))
        if self.free() <= 0 or any(r.blocked_by == "team" for r in queued):
            blocker: str | None = "team"
        elif self.key_full(workflow, key):
            blocker = "key"
        elif self.free(workflow) <= 0 or any(
            r.workflow == workflow and r.blocked_by == "workflow" for r in queued
        ):
            blocker = "workflow"
        elif self.live((Status.QUEUED,), workflow, key):
            blocker = "key" if key else "workflow"
        else:
            return None, None, None
        if on_limit == "reject":
            return blocker, None, blocker
        superseded = None
        if on_limit == "cancel_running" and blocker in ("key", "workflow"):
            holders = self.live(SLOT_HOLDING, workflow, key)
            superseded = holders[0] if holders else None
            if superseded or blocker == "key":
                return None, superseded, None
        elif on_limit == "keep_latest":
            queued_of_key = self.live((Status.QUEUED,), workflow, key)
            superseded = queued_of_key[-1] if queued_of_key else None
        bound = self.max_queued.get(workflow, 0)
        ahead = len(self.live((Status.QUEUED,), workflow, key)) - (superseded is not None)
        if bound and ahead >= bound:
            return blocker, None, QUEUE_FULL
        return blocker, superseded, None

    def fair_heads(self, workflow: str, take: float) -> list[Run]:
        """promotion.sql's fair_queue_heads: a workflow's keys round-robin, in each round the
        higher priority, then the key promoted least recently (never: first), then the older head
        first; within a key higher priority, then older, first; a key at most its free slots."""
        order = {r.id: n for n, r in enumerate(self.runs)}
        per_key = self.per_key.get(workflow, 0)
        ranked = []
        for key in {r.key for r in self.live((Status.QUEUED,), workflow)}:
            free = take
            if per_key:
                free = min(take, per_key - len(self.live(SLOT_HOLDING, workflow, key)))
            queue = sorted(
                self.live((Status.QUEUED,), workflow, key),
                key=lambda r: (-r.priority, order[r.id]),
            )
            taken = [r.promoted for r in self.runs if r.workflow == workflow and r.key == key]
            last = max((n for n in taken if n is not None), default=-1)
            for turn, run in enumerate(queue[: max(0, int(min(free, len(queue))))]):
                ranked.append(((turn, -run.priority, last, order[run.id]), run))
        ranked.sort(key=lambda pair: pair[0])
        heads = [run for _, run in ranked]
        return heads if math.isinf(take) else heads[: int(take)]

    def promote(self) -> list[uuid.UUID]:
        """queue_promote: each workflow's fair heads, merged higher priority then older first,
        at most the team's free slots; then the queue's labels."""
        self.promotion_owed = False
        if not self.live((Status.QUEUED,)):
            return []
        order = {r.id: n for n, r in enumerate(self.runs)}
        team_free = self.free()
        candidates = []
        for workflow in WORKFLOWS:
            take = min(self.free(workflow), team_free)
            if take > 0:
                heads = self.fair_heads(workflow, take)
                candidates.append([(-r.priority, order[r.id], r) for r in heads])
        merged = [run for _, _, run in heapq.merge(*candidates, key=lambda c: c[:2])]
        chosen = merged if math.isinf(team_free) else merged[: int(team_free)]
        self.promotions += 1
        for run in chosen:
            run.status, run.blocked_by, run.promoted = Status.PENDING, None, self.promotions
        team_full = team_free - len(chosen) <= 0
        for run in self.live((Status.QUEUED,)):
            full_key = self.key_full(run.workflow, run.key)
            run.blocked_by = "team" if team_full else "key" if full_key else "workflow"
        return [run.id for run in chosen]

    def end(self, run: Run, status: str) -> None:
        run.status, run.blocked_by = status, None

    # The rules ----------------------------------------------------------------------------
    @rule(
        workflow=st.sampled_from(list(WORKFLOWS)),
        burst=st.lists(
            st.tuples(st.sampled_from(KEYS), st.integers(min_value=0, max_value=2)),
            min_size=1,
            max_size=4,
        ),
    )
    def admit(self, workflow: str, burst: list[tuple[str, int]]) -> None:
        for key, priority in burst:
            self.admit_one(workflow, key, priority)

    def admit_one(self, workflow: str, key: str, priority: int) -> None:
        keyed = WORKFLOWS[workflow][1]
        key = key if keyed else ""
        blocker, superseded, rejected_by = self.decide(workflow, key)
        try:
            admission = execution_admit(
                team=self.team,
                workflow=self.workflows[workflow],
                inputs={"customer": key} if keyed else None,
                priority=priority,
            )
        except ConcurrencyLimitExceeded as exc:
            assert exc.scope == rejected_by, (exc.scope, rejected_by)
            return
        assert rejected_by is None, f"admitted where the model rejects by {rejected_by}"
        execution = admission.execution
        assert execution.blocked_by == blocker
        assert (execution.concurrency_key, execution.priority) == (key, priority)
        status = Status.QUEUED if blocker else Status.PENDING
        run = Run(execution.id, workflow, key, priority, status, False, blocker)
        self.runs.append(run)
        if superseded is not None:
            self.end(superseded, Status.CANCELLED)
            if superseded.forced:  # only cancel_running supersedes a holder
                self.over.add(workflow)
            stored = Execution.objects.get(id=superseded.id)
            assert stored.error == f"superseded by {run.id}"
        if blocker:
            order = {r.id: n for n, r in enumerate(self.runs)}
            queue = self.live((Status.QUEUED,), workflow, key)
            assert admission.queue_position == sum(not run.outranks(r, order) for r in queue)
        if superseded is not None:
            self.promote()  # after the superseded one's commit

    @rule(workflow=st.sampled_from(list(WORKFLOWS)), key=st.sampled_from(KEYS))
    def admit_forced(self, workflow: str, key: str) -> None:
        keyed = WORKFLOWS[workflow][1]
        execution = execution_admit(
            team=self.team,
            workflow=self.workflows[workflow],
            inputs={"customer": key} if keyed else None,
            force=True,
        ).execution
        self.runs.append(
            Run(execution.id, workflow, execution.concurrency_key, 0, Status.PENDING, True, None)
        )

    @precondition(lambda self: self.live(SLOT_HOLDING))
    @rule(
        pick=st.integers(min_value=0, max_value=50),
        outcome=st.sampled_from([Status.COMPLETED, Status.FAILED, Status.TIMED_OUT]),
    )
    def finish(self, pick: int, outcome: str) -> None:
        holders = self.live(SLOT_HOLDING)
        run = holders[pick % len(holders)]
        assert execution_finish(run.id, status=outcome)
        self.end(run, outcome)
        self.promote()

    @precondition(lambda self: self.live(SLOT_HOLDING))
    @rule(picks=st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=3))
    def finish_then_die_before_promotion(self, picks: list[int]) -> None:
        # A batch of terminal states is committed (the engine settles in batches); the process
        # dies before its on-commit promotion.
        for pick in picks:
            holders = self.live(SLOT_HOLDING)
            if holders:
                run = holders[pick % len(holders)]
                Execution.objects.filter(id=run.id).update(status=Status.COMPLETED)
                self.end(run, Status.COMPLETED)
        self.promotion_owed = True

    @precondition(lambda self: self.promotion_owed)
    @rule()
    def promote_what_is_owed(self) -> None:
        # Several slots freed at once: the order of the promoted is the fair order.
        assert promotion.queue_promote(self.team.id, trigger="poller") == self.promote()

    @precondition(lambda self: self.live((Status.QUEUED, *SLOT_HOLDING)))
    @rule(pick=st.integers(min_value=0, max_value=50))
    def cancel(self, pick: int) -> None:
        live = self.live((Status.QUEUED, *SLOT_HOLDING))
        run = live[pick % len(live)]
        execution_cancel(run.id)
        self.end(run, Status.CANCELLED)
        self.promote()

    @rule(limit=st.one_of(st.none(), st.integers(min_value=0, max_value=4)))
    def change_team_limit(self, limit: int | None) -> None:
        old = self.team_limit
        team_set_limit(team=self.team, max_concurrent_executions=limit)
        self.team_limit = 0 if limit is None else limit  # the test config's default is 0
        self.lowered |= not loosens(old, self.team_limit) and old != self.team_limit
        if loosens(old, self.team_limit):
            self.promote()

    @rule(workflow=st.sampled_from(list(WORKFLOWS)), limit=st.integers(min_value=0, max_value=3))
    def change_workflow_limit(self, workflow: str, limit: int) -> None:
        old, self.limits[workflow] = self.limits[workflow], limit
        self.lowered |= not loosens(old, limit) and old != limit
        self._apply(workflow)
        if loosens(old, limit):
            self.promote()

    @precondition(
        lambda self: any(r.workflow in self.max_queued for r in self.live((Status.QUEUED,)))
    )
    @rule()
    def clock_advances(self) -> None:
        # The queue's clock, not the wall's: queued_at is what queue_timeout counts from.
        Execution.objects.filter(team=self.team, status=Status.QUEUED).update(
            queued_at=F("queued_at") - CLOCK_STEP
        )
        for run in self.live((Status.QUEUED,)):
            run.waited += CLOCK_STEP

    @rule()
    def poller(self) -> None:
        promotion.queue_promote_all(trigger="poller")
        for run in self.live((Status.QUEUED,)):
            if run.workflow in self.max_queued and run.waited >= QUEUE_TIMEOUT:
                self.end(run, Status.TIMED_OUT)
                run.expired = True
        self.promote()

    # The checks ---------------------------------------------------------------------------
    def stored(self) -> list[Execution]:
        return list(Execution.objects.filter(team=self.team).select_related("workflow"))

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
        holders = [e for e in self.stored() if e.status in SLOT_HOLDING and not e.forced]
        for (name, key), group in itertools.groupby(
            sorted(holders, key=lambda e: (e.workflow.name, e.concurrency_key)),
            key=lambda e: (e.workflow.name, e.concurrency_key),
        ):
            if name in self.per_key and name not in self.over:  # a key's limit: never lowered
                assert len(list(group)) <= self.per_key[name], (name, key)
        if self.lowered:  # lowering a limit never evicts: holders may exceed it until they finish
            return
        if self.team_limit:
            assert len(holders) <= self.team_limit
        for name, limit in self.limits.items():
            if limit and name not in self.over:
                assert sum(e.workflow.name == name for e in holders) <= limit

    @invariant()
    def queues_stay_within_their_bounds(self) -> None:
        queued = [e for e in self.stored() if e.status == Status.QUEUED]
        for name in WORKFLOWS:
            for key in (*KEYS, ""):
                waiting = sum(e.workflow.name == name and e.concurrency_key == key for e in queued)
                if name == "latest":
                    assert waiting <= 1, f"{waiting} queued of key {key!r} under keep_latest"
                if self.max_queued.get(name):
                    assert waiting <= self.max_queued[name], (name, key)

    @invariant()
    def a_key_is_promoted_in_priority_then_fifo_order(self) -> None:
        # No queued execution outranks one of its key that was promoted while it waited.
        executions = self.stored()
        order = {e.id: (e.created_at, e.id) for e in executions}
        for waiting in (e for e in executions if e.status == Status.QUEUED):
            for promoted in executions:
                if (
                    promoted.workflow_id == waiting.workflow_id
                    and promoted.concurrency_key == waiting.concurrency_key
                    and promoted.promoted_at is not None
                    and waiting.created_at < promoted.promoted_at
                ):
                    assert (promoted.priority, order[waiting.id]) >= (
                        waiting.priority,
                        order[promoted.id],
                    ), (waiting.id, promoted.id)

    @invariant()
    def timed_out_in_the_queue_held_nothing(self) -> None:
        expired = Execution.objects.filter(team=self.team, error__startswith="queued longer than")
        assert {e.id for e in expired} == {r.id for r in self.runs if r.expired}
        for execution in expired:
            assert execution.status == Status.TIMED_OUT
            assert execution.error == "queued longer than 1m"
            assert execution.promoted_at is None and execution.started_at is None

    @invariant()
    def nothing_waits_while_its_slots_are_free(self) -> None:
        if self.promotion_owed:  # until the poller (or the next promotion) runs
            return
        for run in self.live((Status.QUEUED,)):
            assert (
                self.free() <= 0
                or self.free(run.workflow) <= 0
                or self.key_full(run.workflow, run.key)
            ), run


@pytest.mark.django_db(transaction=True)
def test_limits_hold_in_random_interleavings(mantle_config):
    mantle_config("engine", max_concurrent_executions_per_team=0)
    run_state_machine_as_test(
        LimitsModel,
        settings=settings(
            max_examples=40,
            stateful_step_count=40,
            deadline=None,
            derandomize=True,  # the same interleavings on every CI run
            suppress_health_check=list(HealthCheck),
        ),
    )
