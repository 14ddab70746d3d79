"""A pause racing a flood of admissions and completions (docs/operations.md, Pausing during an
incident): from the moment the pause commits, no execution of what it pauses becomes pending,
in any sample; the same flood without locks breaks it. Then a resume promotes the whole queue in
FIFO order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from django.db import OperationalError, connection, connections

from core import locks
from executions.models import Execution, Status
from executions.services.admission import execution_admit
from executions.services.pauses import (
    PauseChange,
    limit_pause_set,
    team_pause_set,
    workflow_pause_set,
)
from teams.models import NamedLimit
from teams.services import named_limit_set
from tests.concurrency.harness import is_deadlock, run_in_threads
from tests.concurrency.test_admission_races import (
    assert_promoted_in_fifo_order,
    drain,
    with_completions,
)

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT, ADMISSIONS = 20, 300

# Executions of the team that became pending while it was paused: after the statement that
# paused it (under the locks) and before its resume began.
PENDING_WHILE_PAUSED_SQL = """
SELECT count(*) FROM executions_execution e, unnest(%s::timestamptz[], %s::timestamptz[]) AS p(s, r)
 WHERE e.team_id = %s AND e.pending_at > p.s AND e.pending_at < p.r
"""


class PauseCycles(threading.Thread):
    """Pauses and resumes over and over while the flood runs, on a connection of its own,
    keeping each pause's interval: from its paused_at (the time of its statement, after its
    locks) to the database's clock just before its resume began. Every row that became pending
    in an interval is checked, not a sample of them."""

    PAUSED_FOR = 0.01

    def __init__(self, team_id: int, pause: Callable[[bool], PauseChange]) -> None:
        super().__init__(daemon=True)
        self.team_id, self.pause = team_id, pause
        self.halt = threading.Event()
        self.starts: list[datetime] = []
        self.ends: list[datetime] = []
        self.busy = self.held = self.deadlocks = 0

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                change = self._changed(paused=True)
                if change is None:
                    continue
                time.sleep(self.PAUSED_FOR)
                with connection.cursor() as cursor:
                    cursor.execute("SELECT clock_timestamp()")
                    (before_resume,) = cursor.fetchone()
                while self._changed(paused=False) is None:
                    pass
                assert change.paused_at is not None
                self.starts.append(change.paused_at)
                self.ends.append(before_resume)
        finally:
            connections.close_all()

    def _changed(self, *, paused: bool) -> PauseChange | None:
        """None when the team's lock stayed busy past lock_timeout (the API's 503 `busy`):
        under this flood a pause may wait that long for it. Without the locks, a resume's
        promotion and a completion's may also update the same queued rows in opposite orders;
        PostgreSQL breaks that deadlock, counted here (the locked tests expect none)."""
        try:
            change = self.pause(paused)
        except OperationalError as error:
            if is_deadlock(error):
                self.deadlocks += 1
                return None
            if not locks.is_busy(error):
                raise
            self.busy += 1
            return None
        self.held += change.promoted
        return change

    def stop(self) -> PauseCycles:
        """After its current cycle (resumed): a thread left running would hold its connection
        into the test's teardown."""
        self.halt.set()
        self.join()
        return self

    @property
    def cycles(self) -> int:
        return len(self.starts)

    def pending_while_paused(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute(PENDING_WHILE_PAUSED_SQL, [self.starts, self.ends, self.team_id])
            return int(cursor.fetchone()[0])


def flood_pausing(
    team, workflow, pause: Callable[[bool], PauseChange], *, locked: bool = True
) -> PauseCycles:
    """`locked` False: the lockless mutant, whose admissions may also end in a deadlock."""
    cycles = PauseCycles(team.id, pause)
    cycles.start()
    jobs = [lambda: admit_or_busy(team, workflow)] * ADMISSIONS
    try:
        outcomes = with_completions([workflow], lambda: run_in_threads(jobs, threads=16))
    finally:
        cycles.stop()
    assert set(outcomes) <= {"pending", "queued", "busy"} | (set() if locked else {"deadlock"})
    return cycles


def admit_or_busy(team, workflow) -> str:
    """An admission, or "busy" when the team's lock stayed taken past lock_timeout (the API's
    503 `busy`): a pause or resume promoting a long held queue holds it that long on a loaded
    machine."""
    try:
        return execution_admit(team=team, workflow=workflow).status
    except OperationalError as error:
        if is_deadlock(error):
            return "deadlock"
        if not locks.is_busy(error):
            raise
        return "busy"


TARGETS: dict[str, Callable[[object, bool], PauseChange]] = {
    "workflow": lambda workflow, paused: workflow_pause_set(workflow=workflow, paused=paused),
    "team": lambda workflow, paused: team_pause_set(team=workflow.team, paused=paused),
    "limit": lambda workflow, paused: limit_pause_set(
        limit=NamedLimit.objects.get(), paused=paused
    ),
}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_nothing_becomes_pending_after_a_pause_commits(target, make_team, make_workflow):
    team = make_team()
    named_limit_set(team=team, name="prod-db", max=0)
    workflow = make_workflow(team, limit=LIMIT, extra="limits: [prod-db]\n")
    cycles = flood_pausing(team, workflow, lambda paused: TARGETS[target](workflow, paused))
    late = cycles.pending_while_paused()
    print(
        f"\npauses of the {target}: {cycles.cycles} ({cycles.busy} busy), {late} became "
        f"pending while paused; {cycles.held} held and promoted by a resume"
    )
    assert cycles.cycles > 5 and cycles.held > 0
    assert late == 0 and cycles.deadlocks == 0
    drain([workflow])
    assert Execution.objects.filter(status=Status.COMPLETED).count() == Execution.objects.count()
    assert_promoted_in_fifo_order(workflow)


def test_nothing_becomes_pending_after_the_pause_of_an_unlimited_workflow(make_team, make_workflow):
    """Unlimited, every admission a pause does not hold is pending, and each completion's
    promotion would promote the whole held queue: both must respect the pause."""
    team = make_team()
    workflow = make_workflow(team)
    cycles = flood_pausing(team, workflow, lambda paused: TARGETS["workflow"](workflow, paused))
    assert cycles.cycles > 5 and cycles.held > 0
    assert cycles.pending_while_paused() == 0 and cycles.deadlocks == 0


def test_without_locks_executions_become_pending_after_a_pause(
    make_team, make_workflow, without_locks
):
    """Proof that the test catches the bug: the same flood without the locks. Admissions that
    read the pause state before it committed become pending after it."""
    team = make_team()
    workflow = make_workflow(team)
    cycles = flood_pausing(
        team, workflow, lambda paused: TARGETS["workflow"](workflow, paused), locked=False
    )
    late = cycles.pending_while_paused()
    print(
        f"\nwithout locks: {late} became pending while paused ({cycles.cycles} pauses, "
        f"{cycles.deadlocks} deadlocks)"
    )
    assert late > 0
