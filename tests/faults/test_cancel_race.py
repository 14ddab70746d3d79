"""Cancel racing promotion and a worker's start, 500 times, on real threads with connections of
their own: an execution is never promoted or started after it was cancelled, and slot accounting
stays exact (slot holders are rows, counted: after the race, none is left)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.db import connection, connections

from executions.models import SLOT_HOLDING, Execution, Status
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_cancel, execution_finish, execution_start
from teams.models import Team
from tests.concurrency.harness import Sampler
from workflows.models import WorkflowDefinition

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROUNDS = 500
JITTER = 0.006  # seconds: spreads the worker's tries and the mutant's read-to-update window
CANCEL_JITTER = 0.02  # seconds: cancel lands before, during or after promotion and start


@dataclass
class Race:
    """One holder `a` and one queued `b` per round; three threads race: finish `a` (which
    promotes `b` after its commit), cancel `b`, and a worker starting `b` once it is pending."""

    workflow: WorkflowDefinition
    rounds: int
    outcomes: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    a: Execution | None = None
    b: Execution | None = None

    def run(self) -> None:
        go, done = threading.Barrier(4, timeout=30), threading.Barrier(4, timeout=30)
        threads = [
            threading.Thread(target=self._loop, args=(job, go, done), daemon=True)
            for job in (self._finish_a, self._cancel_b, self._start_b)
        ]
        for thread in threads:
            thread.start()
        try:
            for _ in range(self.rounds):
                team = self.workflow.team
                self.a = execution_admit(team=team, workflow=self.workflow).execution
                self.b = execution_admit(team=team, workflow=self.workflow).execution
                assert (self.a.status, self.b.status) == (Status.PENDING, Status.QUEUED)
                go.wait()
                done.wait()
                self._check()
                if self.violations:
                    break
        finally:
            go.abort()
            for thread in threads:
                thread.join(timeout=10)

    def _loop(
        self, job: Callable[[], None], go: threading.Barrier, done: threading.Barrier
    ) -> None:
        try:
            for _ in range(self.rounds):
                go.wait()
                job()
                done.wait()
        except threading.BrokenBarrierError:
            pass
        finally:
            connections.close_all()

    def _finish_a(self) -> None:
        execution_finish(self.a.id, status=Status.COMPLETED)

    def _cancel_b(self) -> None:
        time.sleep(random.uniform(0, CANCEL_JITTER))
        execution_cancel(self.b.id)

    def _start_b(self) -> None:
        """A worker handed `b`: it tries pending → running until it wins or `b` is cancelled."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if execution_start(self.b.id):
                return
            status = Execution.objects.values_list("status", flat=True).get(id=self.b.id)
            if status == Status.CANCELLED:
                return
            time.sleep(random.uniform(0, JITTER / 4))

    def _check(self) -> None:
        b = Execution.objects.get(id=self.b.id)
        if b.started_at is not None:
            self.outcomes["cancelled while running"] += 1
        elif b.promoted_at is not None:
            self.outcomes["cancelled while pending"] += 1
        else:
            self.outcomes["cancelled while queued"] += 1
        if b.status != Status.CANCELLED:
            self.violations.append(f"{b.id} is {b.status} after it was cancelled")
        for moment in ("promoted_at", "started_at"):
            at = getattr(b, moment)
            if at is not None and at > b.completed_at:
                self.violations.append(f"{b.id} {moment} {at} after its cancel {b.completed_at}")
        holders = Execution.objects.filter(workflow=self.workflow, status__in=SLOT_HOLDING)
        if holders.exists():
            self.violations.append(f"slot holders left after round: {list(holders)}")


def race(team: Team, make_workflow: Callable[..., WorkflowDefinition], rounds: int) -> Race:
    workflow = make_workflow(team, limit=1)
    sampler = Sampler(team.id)
    sampler.start()
    try:
        result = Race(workflow, rounds)
        result.run()
    finally:
        sampler.stop()
    assert sampler.samples > 0
    if sampler.max_per_workflow.get(workflow.id, 0) > 1:
        result.violations.append(f"{sampler.max_per_workflow[workflow.id]} slot holders seen")
    return result


def test_cancel_racing_promotion_500_times_never_leaves_a_cancelled_execution_running(
    team: Team, make_workflow: Callable[..., WorkflowDefinition]
) -> None:
    result = race(team, make_workflow, ROUNDS)
    print(f"\n[faults] cancel vs promotion x{ROUNDS}: {dict(result.outcomes)}")
    assert result.violations == []
    assert sum(result.outcomes.values()) == ROUNDS
    # The race really interleaves: cancel lands before, between and after promotion and start.
    assert len(result.outcomes) >= 2
    # Exact accounting: the slot is free, the next execution takes it at once.
    assert execution_admit(team=team, workflow=result.workflow).execution.status == Status.PENDING


def test_without_the_conditional_promotion_the_race_promotes_cancelled_executions(
    team: Team, make_workflow: Callable[..., WorkflowDefinition]
) -> None:
    """Proof that the race catches the bug: promotion that updates the rows it chose without
    re-checking `status = 'queued'` promotes executions cancelled after it read the queue."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('mantle_promote'::regproc)")
        original = cursor.fetchone()[0]
    conditional = "WHERE id = ANY(_chosen) AND status = 'queued'"
    update = "    WITH promoted AS ("
    assert original.count(conditional) == 1 and original.count(update) == 1
    # Widens the window between the read of the queue and the update.
    mutant = original.replace(conditional, "WHERE id = ANY(_chosen)").replace(
        update, f"    PERFORM pg_sleep({JITTER});\n{update}"
    )
    with connection.cursor() as cursor:
        cursor.execute(mutant)
    try:
        result = race(team, make_workflow, 40)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(original)
    assert result.violations, result.outcomes
