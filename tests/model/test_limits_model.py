"""Model-based test: random interleavings of admit / force / complete / fail / cancel /
change-limit / clock / poller against the real database, checked after every step against a plain
Python model of the rules of docs/limits.md (keys, fair promotion, priority, the strategies,
max_queued and queue_timeout, two named limits shared by three workflows, one of them listing
both, listed and unlisted, deleted while in use (refused) and once unused, rate limits per
workflow and per key, rejections by a named limit and by a rate with its Retry-After, and
debounce). Time is the model's: rules move the rows' timestamps back instead of sleeping.
Mutants of promotion show that the named-limit and rate invariants can fail; of admission, that
the model's check of each admission does."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone
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

from executions.models import SLOT_HOLDING, Execution, Status
from executions.services import promotion
from executions.services.admission import (
    QUEUE_FULL,
    ConcurrencyLimitExceeded,
    execution_admit,
)
from executions.services.lifecycle import execution_cancel, execution_finish
from executions.services.named_limits import NamedLimitInUse, named_limit_delete
from teams.models import NamedLimit
from teams.services import named_limit_set, team_create, team_set_limit
from teams.signals import loosens
from tests.factories import workflow_yaml
from workflows.schema import WorkflowInvalid
from workflows.services import workflow_apply

# name: (on_limit, keyed). steady and keyed queue, strict rejects, latest keeps the latest queued
# of a key, supersede cancels the oldest holder of its key.
WORKFLOWS = {
    "steady": ("queue", False),
    "strict": ("reject", False),
    "keyed": ("queue", True),
    "latest": ("keep_latest", True),
    "supersede": ("cancel_running", True),
    "pooled": ("queue", False),
    "shared": ("queue", False),
    "guarded": ("reject", False),
    "rated": ("queue", False),
    "keyrated": ("queue", True),
    "debounced": ("queue", True),
}
# The named limits (lock order: by name) and the workflows that list them at the start: shared
# holds a slot of both; guarded rejects when gate (or its rate) is full. shared and guarded
# may stop listing gate (relist), which then can be deleted.
GATE, POOL = "gate", "pool"
LISTED = {"pooled": (POOL,), "shared": (GATE, POOL), "guarded": (GATE,)}
RELISTABLE = ("shared", "guarded")
# name: (max, per_key) of its rate_limit, all of period RATE_PERIOD.
RATES = {"rated": (2, False), "guarded": (2, False), "keyrated": (1, True)}
RATE_PERIOD = timedelta(minutes=15)
DEBOUNCE = timedelta(minutes=5)  # debounced's
FLOW_CONTROLLED = (*LISTED, *RATES, "debounced")
# time_passes: a debounce passes in one, a row leaves the rate window in three. The database's
# windows count real time too: the seconds an example takes (20 and more under load) must stay
# far inside a TICK, or a row leaves the window or a debounce passes before the model has it so.
TICK = DEBOUNCE
KEYS = ("a", "b", "c")
QUEUE_TIMEOUT = timedelta(minutes=1)  # steady's and keyed's; the test's own run time never is
CLOCK_STEP = QUEUE_TIMEOUT  # a step expires what was queued before it, not what queues after
_slugs = itertools.count()
MUTANT_EXAMPLES = 30  # each mutant below is caught within them (derandomized: the same ones)
BURSTS = st.lists(
    st.tuples(st.sampled_from(KEYS), st.integers(min_value=0, max_value=2)), min_size=1, max_size=4
)


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
    pending_for: timedelta | None = None  # since it became pending (pending_at), by the clock
    debounce_left: timedelta | None = None  # not_before - now while not_before is set
    due_at: timedelta | None = None  # debounced: the model's clock when its debounce passes
    promoted_clock: timedelta | None = None  # the model's clock when it was promoted
    limits: tuple[str, ...] = ()  # the named limits it holds a slot of (its row's named_limits)
    blocked_by_limit: str | None = None  # the named limit it waits for

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
                "pooled": st.integers(min_value=0, max_value=2),
                "shared": st.integers(min_value=0, max_value=1),
                "guarded": st.integers(min_value=0, max_value=2),
                "rated": st.integers(min_value=0, max_value=2),
                "keyrated": st.integers(min_value=0, max_value=2),
                "debounced": st.integers(min_value=0, max_value=2),
            }
        ),
        pool=st.integers(min_value=1, max_value=3),
        gate=st.integers(min_value=1, max_value=2),
        per_key=st.integers(min_value=1, max_value=2),
        max_queued=st.fixed_dictionaries(
            {
                "steady": st.integers(min_value=0, max_value=2),
                "keyed": st.integers(min_value=1, max_value=2),
            }
        ),
    )
    def start(
        self,
        team_limit: int,
        limits: dict[str, int],
        pool: int,
        gate: int,
        per_key: int,
        max_queued: dict[str, int],
    ) -> None:
        self.team = team_create(
            slug=f"model-{next(_slugs)}", max_concurrent_executions=team_limit or None
        )
        self.named = {GATE: gate, POOL: pool}  # the named limits that exist: their max
        self.named_ids = {
            name: named_limit_set(team=self.team, name=name, max=max_)[0].id
            for name, max_ in self.named.items()
        }
        self.named_lowered: set[str] = set()
        self.listed = dict(LISTED)
        self.clock = timedelta()  # the model's time: TICKs passed
        self.team_limit = team_limit
        self.limits = limits
        # keep_latest and cancel_running with one slot a key: the strategies at their sharpest.
        self.per_key = {"keyed": per_key, "latest": 1, "supersede": 1, "debounced": 1}
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
            if self.per_key.get(name):
                extra += f"max_parallel_per_key: {self.per_key[name]}\n"
        if name in self.max_queued:
            extra += f"max_queued: {self.max_queued[name]}\nqueue_timeout: 1m\n"
        if self.listed.get(name):
            extra += f"limits: [{', '.join(self.listed[name])}]\n"
        if name in RATES:
            rate_max, per_key = RATES[name]
            extra += (
                f"rate_limit: {{max: {rate_max}, period: 15m, per_key: {str(per_key).lower()}}}\n"
            )
        if name == "debounced":
            extra += "debounce: 5m\n"
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

    def limit_free(self, name: str) -> float:
        """A named limit's free slots: its holders are the executions admitted while their
        workflow listed it (their rows' named_limits), whatever it lists now."""
        holders = sum(name in r.limits for r in self.live(SLOT_HOLDING))
        return math.inf if self.named[name] == 0 else max(0, self.named[name] - holders)

    def in_rate_window(self, workflow: str, key: str | None) -> list[Run]:
        """The workflow's rows (of `key` when its rate is per key) that became pending less
        than a period ago, whatever became of them since; the newest first."""
        per_key = RATES[workflow][1] and key is not None
        window = [
            r
            for r in self.runs
            if r.workflow == workflow
            and r.pending_for is not None
            and r.pending_for < RATE_PERIOD
            and (not per_key or r.key == key)
        ]
        return sorted(window, key=lambda r: r.pending_for)

    def rate_room(self, workflow: str, key: str | None = None) -> float:
        """What the rate window has room for: the workflow's, or with a rate per key, `key`'s
        (none given: no bound for the whole workflow)."""
        if workflow not in RATES or (RATES[workflow][1] and key is None):
            return math.inf
        return max(0, RATES[workflow][0] - len(self.in_rate_window(workflow, key)))

    def first_full_limit(self, limits: tuple[str, ...]) -> str | None:
        return next((name for name in sorted(limits) if self.limit_free(name) <= 0), None)

    def debouncing(self, run: Run) -> bool:
        return run.debounce_left is not None and run.debounce_left > timedelta()

    def decide(
        self, workflow: str, key: str
    ) -> tuple[str | None, str | None, Run | None, str | None]:
        """mantle_admit's decision: (what blocks the newcomer, the named limit it waits for, the
        run it supersedes, the scope that rejects it)."""
        on_limit, _ = WORKFLOWS[workflow]
        queued = self.live((Status.QUEUED,))
        if workflow == "debounced":  # it supersedes the one of its key waiting out its debounce
            waiting = [r for r in self.live((Status.QUEUED,), workflow, key) if self.debouncing(r)]
            return "debounce", None, waiting[-1] if waiting else None, None
        # The first of its named limits (by name) that is full or has a queue waiting for it.
        limit = next(
            (
                name
                for name in sorted(self.listed.get(workflow, ()))
                if self.limit_free(name) <= 0
                or any(r.blocked_by == "limit" and r.blocked_by_limit == name for r in queued)
            ),
            None,
        )
        if self.free() <= 0 or any(r.blocked_by == "team" for r in queued):
            blocker: str | None = "team"
        elif limit is not None:
            blocker = "limit"
        elif self.key_full(workflow, key):
            blocker = "key"
        elif self.free(workflow) <= 0 or any(
            r.workflow == workflow and r.blocked_by == "workflow" for r in queued
        ):
            blocker = "workflow"
        elif self.rate_room(workflow, key) <= 0:
            blocker = "rate"
        elif self.live((Status.QUEUED,), workflow, key):
            blocker = "key" if key else "workflow"
        else:
            return None, None, None, None
        limit = limit if blocker == "limit" else None
        if on_limit == "reject":
            return blocker, limit, None, blocker
        superseded = None
        if on_limit == "cancel_running" and blocker in ("key", "workflow"):
            holders = self.live(SLOT_HOLDING, workflow, key)
            superseded = holders[0] if holders else None
            if superseded or blocker == "key":
                return None, None, superseded, None
        elif on_limit == "keep_latest":
            queued_of_key = self.live((Status.QUEUED,), workflow, key)
            superseded = queued_of_key[-1] if queued_of_key else None
        bound = self.max_queued.get(workflow, 0)
        ahead = len(self.live((Status.QUEUED,), workflow, key)) - (superseded is not None)
        if bound and ahead >= bound:
            return blocker, limit, None, QUEUE_FULL
        return blocker, limit, superseded, None

    def fair_heads(self, workflow: str, take: float) -> list[Run]:
        """promotion.sql's fair_queue_heads: a workflow's keys round-robin, in each round the
        higher priority, then the key promoted least recently (never: first), then the older head
        first; within a key higher priority, then older, first; a key at most its free slots and,
        with a rate per key, its window's room."""
        order = {r.id: n for n, r in enumerate(self.runs)}
        per_key = self.per_key.get(workflow, 0)
        ranked = []
        for key in {r.key for r in self.live((Status.QUEUED,), workflow)}:
            free = take
            if per_key:
                free = min(take, per_key - len(self.live(SLOT_HOLDING, workflow, key)))
            free = min(free, self.rate_room(workflow, key))
            queue = sorted(
                (r for r in self.live((Status.QUEUED,), workflow, key) if not self.debouncing(r)),
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
        """queue_promote: each workflow's fair heads (at most its free slots and its rate
        window's room), merged higher priority then older first, at most the team's free slots,
        each only while every named limit it holds has a free slot; then the queue's labels."""
        self.promotion_owed = False
        if not self.live((Status.QUEUED,)):
            return []
        order = {r.id: n for n, r in enumerate(self.runs)}
        team_free = self.free()
        candidates = []
        for workflow in WORKFLOWS:
            take = min(self.free(workflow), team_free, self.rate_room(workflow))
            if take > 0:
                heads = self.fair_heads(workflow, take)
                candidates.append([(-r.priority, order[r.id], r) for r in heads])
        chosen: list[Run] = []
        limits_free = {name: self.limit_free(name) for name in self.named}
        for _, _, run in heapq.merge(*candidates, key=lambda c: c[:2]):
            if len(chosen) >= team_free:
                break
            if any(limits_free[name] <= 0 for name in run.limits):
                continue  # passed over: one of another workflow may still fit
            for name in run.limits:
                limits_free[name] -= 1
            chosen.append(run)
        self.promotions += 1
        for run in chosen:
            run.status, run.blocked_by, run.promoted = Status.PENDING, None, self.promotions
            run.pending_for, run.promoted_clock = timedelta(), self.clock
        team_full = team_free - len(chosen) <= 0
        for run in self.live((Status.QUEUED,)):
            run.blocked_by_limit = None
            if self.debouncing(run):
                run.blocked_by = "debounce"
                continue
            run.debounce_left = None  # relabel clears a passed not_before
            full_limit = self.first_full_limit(run.limits)
            if team_full:
                run.blocked_by = "team"
            elif full_limit is not None:
                run.blocked_by, run.blocked_by_limit = "limit", full_limit
            elif self.key_full(run.workflow, run.key):
                run.blocked_by = "key"
            elif self.rate_room(run.workflow, run.key) <= 0:
                run.blocked_by = "rate"
            else:
                run.blocked_by = "workflow"
        return [run.id for run in chosen]

    def end(self, run: Run, status: str) -> None:
        run.status, run.blocked_by, run.blocked_by_limit = status, None, None

    # The rules ----------------------------------------------------------------------------
    @rule(workflow=st.sampled_from(list(WORKFLOWS)), burst=BURSTS)
    def admit(self, workflow: str, burst: list[tuple[str, int]]) -> None:
        for key, priority in burst:
            self.admit_one(workflow, key, priority)

    @rule(workflow=st.sampled_from(FLOW_CONTROLLED), burst=BURSTS)
    def admit_where_time_or_a_shared_limit_decides(
        self, workflow: str, burst: list[tuple[str, int]]
    ) -> None:
        self.admit(workflow, burst)  # as often again: their states take several admissions

    def admit_one(self, workflow: str, key: str, priority: int) -> None:
        keyed = WORKFLOWS[workflow][1]
        key = key if keyed else ""
        blocker, limit, superseded, rejected_by = self.decide(workflow, key)
        asked = timezone.now()
        try:
            admission = execution_admit(
                team=self.team,
                workflow=self.workflows[workflow],
                inputs={"customer": key} if keyed else None,
                priority=priority,
            )
        except ConcurrencyLimitExceeded as exc:
            assert (exc.scope, exc.name) == (rejected_by, limit), (exc.scope, rejected_by, limit)
            assert exc.limit == self.limit_of(rejected_by, workflow, limit)
            if rejected_by == "rate":
                self.check_retry_after(exc.retry_after, workflow, key, asked, timezone.now())
            return
        assert rejected_by is None, f"admitted where the model rejects by {rejected_by}"
        execution = admission.execution
        assert (execution.blocked_by, execution.blocked_by_limit) == (blocker, limit)
        assert (execution.concurrency_key, execution.priority) == (key, priority)
        listed = self.listed.get(workflow, ())
        assert execution.named_limits == [self.named_ids[name] for name in listed]
        status = Status.QUEUED if blocker else Status.PENDING
        run = Run(execution.id, workflow, key, priority, status, False, blocker)
        run.limits, run.blocked_by_limit = listed, limit
        if blocker is None:
            run.pending_for = timedelta()
        if blocker == "debounce":
            run.debounce_left, run.due_at = DEBOUNCE, self.clock + DEBOUNCE
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

    def limit_of(self, scope: str, workflow: str, limit: str | None) -> int:
        """The limit a rejection by `scope` names."""
        return {
            "team": self.team_limit,
            "limit": self.named.get(limit or "", 0),
            "key": self.per_key.get(workflow, 0),
            "workflow": self.limits[workflow],
            "rate": RATES.get(workflow, (0, False))[0],
            QUEUE_FULL: self.max_queued.get(workflow, 0),
        }[scope]

    def check_retry_after(
        self, retry_after: int | None, workflow: str, key: str, asked: datetime, answered: datetime
    ) -> None:
        """Retry-After is the whole seconds (at least 1) until the window admits one: until the
        max-th newest of the model's window leaves it, by its stored pending_at, as the wait
        stood between the request and its answer."""
        window = [r.id for r in self.in_rate_window(workflow, key)]
        moments = Execution.objects.filter(id__in=window).values_list("pending_at", flat=True)
        frees = sorted(moments, reverse=True)[RATES[workflow][0] - 1] + RATE_PERIOD
        shortest, longest = (frees - answered).total_seconds(), (frees - asked).total_seconds()
        assert retry_after is not None
        assert max(1, shortest) <= retry_after <= max(1, longest + 1), (retry_after, longest)

    @rule(workflow=st.sampled_from(list(WORKFLOWS)), key=st.sampled_from(KEYS))
    def admit_forced(self, workflow: str, key: str) -> None:
        keyed = WORKFLOWS[workflow][1]
        execution = execution_admit(
            team=self.team,
            workflow=self.workflows[workflow],
            inputs={"customer": key} if keyed else None,
            force=True,
        ).execution
        run = Run(execution.id, workflow, execution.concurrency_key, 0, Status.PENDING, True, None)
        run.pending_for = timedelta()  # it holds its named limits and counts in the rate window
        run.limits = self.listed.get(workflow, ())
        self.runs.append(run)

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

    @rule(name=st.sampled_from([GATE, POOL]), limit=st.integers(min_value=0, max_value=3))
    def change_named_limit(self, name: str, limit: int) -> None:
        # Sets it, or creates it again once deleted.
        named_limit, created = named_limit_set(team=self.team, name=name, max=limit)
        assert created == (name not in self.named)
        old = self.named.get(name)
        self.named[name], self.named_ids[name] = limit, named_limit.id
        if old is not None and loosens(old, limit):
            self.promote()
        elif old is not None and old != limit:
            self.named_lowered.add(name)

    @rule(workflow=st.sampled_from(RELISTABLE), gate=st.booleans())
    def relist(self, workflow: str, gate: bool) -> None:
        # A new version that lists gate or not: what it admits from now on holds gate or not;
        # what it admitted keeps holding (or waiting for) what its row names. It lists no
        # deleted limit: refused at that index.
        before = self.listed[workflow]
        listed = tuple(sorted({*before, GATE} if gate else set(before) - {GATE}))
        self.listed[workflow] = listed
        if GATE in listed and GATE not in self.named:
            with pytest.raises(WorkflowInvalid) as refused:
                self._apply(workflow)
            assert [e.path for e in refused.value.errors] == [f"limits[{listed.index(GATE)}]"]
            self.listed[workflow] = before
        else:
            self.workflows[workflow] = self._apply(workflow)

    @rule(name=st.sampled_from([GATE, POOL]), unlisted_first=st.booleans())
    def delete_named_limit(self, name: str, unlisted_first: bool) -> None:
        # docs/limits.md (Named limits) and services/named_limits.py: refused while a workflow
        # lists it or a live execution holds or waits for one of its slots, naming both.
        # unlisted_first: how an operator deletes gate, once shared and guarded no longer list it
        # (refused while executions admitted under their old versions hold or wait for it).
        if unlisted_first and name == GATE:
            for workflow in RELISTABLE:
                self.relist(workflow, gate=False)
        workflows = sorted(w for w, listed in self.listed.items() if name in listed)
        executions = sum(name in r.limits for r in self.live((Status.QUEUED, *SLOT_HOLDING)))
        if name not in self.named:
            assert named_limit_delete(team=self.team, name=name) is False
        elif workflows or executions:
            with pytest.raises(NamedLimitInUse) as refused:
                named_limit_delete(team=self.team, name=name)
            assert (refused.value.workflows, refused.value.executions) == (workflows, executions)
        else:
            assert named_limit_delete(team=self.team, name=name) is True
            del self.named[name], self.named_ids[name]
            self.named_lowered.discard(name)

    @precondition(lambda self: GATE not in self.named)
    @rule(limit=st.integers(min_value=1, max_value=2))
    def restore_gate(self, limit: int) -> None:
        # Deleted, created again and listed again as at the start: its holders start from none.
        self.change_named_limit(GATE, limit)
        for workflow in RELISTABLE:
            self.relist(workflow, gate=True)

    @rule()
    def time_passes(self) -> None:
        # The rate window's and the debounce's clock: pending_at and not_before move back a
        # TICK, then the engine clock's pass promotes what the window or a debounce now lets go.
        Execution.objects.filter(team=self.team, pending_at__isnull=False).update(
            pending_at=F("pending_at") - TICK
        )
        Execution.objects.filter(team=self.team, not_before__isnull=False).update(
            not_before=F("not_before") - TICK
        )
        self.clock += TICK
        for run in self.runs:
            if run.pending_for is not None:
                run.pending_for += TICK
            if run.debounce_left is not None:
                run.debounce_left -= TICK
        promotion.queue_promote_waiting_for_time()
        queued = self.live((Status.QUEUED,))
        if any(
            r.workflow in RATES or (r.debounce_left is not None and not self.debouncing(r))
            for r in queued
        ):
            self.promote()  # teams_waiting_for_time: a rate-limited queue, or a due debounce

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
        labels = {
            id_: (blocked_by, limit)
            for id_, blocked_by, limit in Execution.objects.filter(
                team=self.team, status=Status.QUEUED
            ).values_list("id", "blocked_by", "blocked_by_limit")
        }
        assert labels == {
            r.id: (r.blocked_by, r.blocked_by_limit) for r in self.runs if r.status == Status.QUEUED
        }

    @invariant()
    def holders_stay_within_limits_except_forced(self) -> None:
        holders = [e for e in self.stored() if e.status in SLOT_HOLDING and not e.forced]
        for (name, key), group in itertools.groupby(
            sorted(holders, key=lambda e: (e.workflow.name, e.concurrency_key)),
            key=lambda e: (e.workflow.name, e.concurrency_key),
        ):
            if self.per_key.get(name) and name not in self.over:  # a key's limit: never lowered
                assert len(list(group)) <= self.per_key[name], (name, key)
        if self.lowered:  # lowering a limit never evicts: holders may exceed it until they finish
            return
        if self.team_limit:
            assert len(holders) <= self.team_limit
        for name, limit in self.limits.items():
            if limit and name not in self.over:
                assert sum(e.workflow.name == name for e in holders) <= limit

    @invariant()
    def the_named_limits_hold_across_their_workflows(self) -> None:
        stored = dict(NamedLimit.objects.filter(team=self.team).values_list("name", "max"))
        assert stored == self.named
        for name, limit_id in self.named_ids.items():
            holders = Execution.objects.filter(
                team=self.team, status__in=SLOT_HOLDING, named_limits__contains=[limit_id]
            )
            listing = {w for w, listed in LISTED.items() if name in listed}
            assert {e.workflow.name for e in holders.select_related("workflow")} <= listing
            if self.named[name] and name not in self.named_lowered:
                assert holders.filter(forced=False).count() <= self.named[name], name

    @invariant()
    def at_most_the_rate_became_pending_in_any_window(self) -> None:
        # pending_at as stored: time_passes moves every row back alike, so their distances are
        # the model's. Forced ones count in the window but are not held to it.
        windows: dict[tuple[str, str], list[datetime]] = {}
        for workflow, key, moment in Execution.objects.filter(
            team=self.team, workflow__name__in=RATES, forced=False, pending_at__isnull=False
        ).values_list("workflow__name", "concurrency_key", "pending_at"):
            windows.setdefault((workflow, key if RATES[workflow][1] else ""), []).append(moment)
        for (workflow, key), moments in windows.items():
            moments.sort()
            for n, end in enumerate(moments):
                inside = sum(end - RATE_PERIOD < moment for moment in moments[: n + 1])
                assert inside <= RATES[workflow][0], (workflow, key, end, moments)

    @invariant()
    def a_debounce_keeps_one_waiting_per_key_and_lets_none_go_early(self) -> None:
        rows = {
            e.id: e for e in Execution.objects.filter(team=self.team, workflow__name="debounced")
        }
        due_at = {r.id: r.due_at for r in self.runs}
        for key in KEYS:
            waiting = [
                e
                for e in rows.values()
                if e.concurrency_key == key
                and e.status == Status.QUEUED
                and e.blocked_by == "debounce"
            ]
            assert len(waiting) <= 1, (key, waiting)
        for execution in rows.values():
            if execution.error.startswith("superseded by "):
                newer = rows[uuid.UUID(execution.error.removeprefix("superseded by "))]
                assert execution.status == Status.CANCELLED and execution.promoted_at is None
                assert newer.concurrency_key == execution.concurrency_key
                assert newer.created_at > execution.created_at
            if execution.promoted_at is not None:  # promoted at or before now: due by then
                assert due_at[execution.id] <= self.clock, execution.id

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
        # No queued execution outranks one of its key that was promoted while it waited (and was
        # due: one waiting out its debounce is not yet in the running).
        executions = self.stored()
        order = {e.id: (e.created_at, e.id) for e in executions}
        runs = {r.id: r for r in self.runs}
        for waiting in (e for e in executions if e.status == Status.QUEUED):
            due_at = runs[waiting.id].due_at
            for promoted in executions:
                if (
                    promoted.workflow_id == waiting.workflow_id
                    and promoted.concurrency_key == waiting.concurrency_key
                    and promoted.promoted_at is not None
                    and waiting.created_at < promoted.promoted_at
                    and not (due_at is not None and due_at > runs[promoted.id].promoted_clock)
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
                or any(self.limit_free(name) <= 0 for name in run.limits)
                or self.rate_room(run.workflow, run.key) <= 0
                or self.debouncing(run)
            ), run


class LimitsModelAgainstAMutant(LimitsModel):
    """The model run against an admission or a promotion that breaks a limit. From the first
    such promotion the database's statuses part from the model's, which the comparison of
    statuses would report first: here the invariant of that limit alone must catch it (an
    admission the model checks as it answers)."""

    def database_matches_the_model(self) -> None:
        """Not an invariant here."""

    @precondition(lambda self: self.promotion_owed)
    @rule()
    def promote_what_is_owed(self) -> None:
        promotion.queue_promote(self.team.id, trigger="poller")
        self.promote()


ADMISSION = "mantle_admit"  # the installed functions
PROMOTION = "mantle_promote"

# A limit's check taken out, each: the check of the model that must catch it, and (the
# function, what, replaced by).
MUTANTS = {
    # Promotion reads every named limit as unlimited.
    "promotion: named limit": (
        "the_named_limits_hold_across_their_workflows",
        (PROMOTION, "ELSE r.free END ORDER BY o.n", "ELSE NULL END ORDER BY o.n"),
    ),
    # Promotion reads a workflow's window as empty.
    "promotion: rate": (
        "at_most_the_rate_became_pending_in_any_window",
        (
            PROMOTION,
            "(SELECT rr.room FROM mantle_rate_room(w.id, NULL, _now) rr)",
            "NULL::bigint",
        ),
    ),
    # Admission never finds a named limit full.
    "admission: named limit": (
        "admit_one",
        (
            ADMISSION,
            "IF _limit_has_queue OR _limit_free = 0 THEN",
            "IF false THEN",
        ),
    ),
    # Admission never finds a rate window full.
    "admission: rate": (
        "admit_one",
        (ADMISSION, "IF _rate_full_until IS NOT NULL THEN", "IF false THEN"),
    ),
}


@contextlib.contextmanager
def function_mutated(function: str, what: str, replacement: str) -> Iterator[None]:
    """The installed function, with `what` replaced (its own source, pg_get_functiondef, so the
    mutant cannot drift from it); the original installed again afterwards."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef(%s::regproc)", [function])
        original = cursor.fetchone()[0]
        assert original.count(what) == 1
        cursor.execute(original.replace(what, replacement))
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(original)


@pytest.mark.django_db(transaction=True)
def test_limits_hold_in_random_interleavings(mantle_config):
    mantle_config("engine", max_concurrent_executions_per_team=0)
    run_state_machine_as_test(
        LimitsModel,
        settings=settings(
            max_examples=30,
            stateful_step_count=36,
            deadline=None,
            derandomize=True,  # the same interleavings on every CI run
            suppress_health_check=list(HealthCheck),
        ),
    )


@pytest.mark.parametrize("mutant", list(MUTANTS))
@pytest.mark.django_db(transaction=True)
def test_the_model_catches_a_limit_ignored(mantle_config, mutant):
    mantle_config("engine", max_concurrent_executions_per_team=0)
    catcher, (where, what, replacement) = MUTANTS[mutant]
    with contextlib.ExitStack() as stack:
        stack.enter_context(function_mutated(where, what, replacement))
        with pytest.raises(AssertionError) as caught:
            run_state_machine_as_test(
                LimitsModelAgainstAMutant,
                settings=settings(
                    max_examples=MUTANT_EXAMPLES,
                    stateful_step_count=36,
                    deadline=None,
                    derandomize=True,
                    phases=[Phase.generate],  # the first violation found; no shrinking
                    suppress_health_check=list(HealthCheck),
                ),
            )
    print(f"\n{mutant} ignored: {catcher} {str(caught.value).splitlines()[0][:120]}")
    assert catcher in {entry.name for entry in caught.traceback}, caught.value
