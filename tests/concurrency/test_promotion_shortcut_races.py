"""The promotion after a terminal commit skips the team's lock when nothing of the team is queued
nor about to be (mantle_promotion_owed.sql): it must lose no promotion, under load."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import connection, connections

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from teams.models import Team
from tests.concurrency.test_admission_races import _finish_while_an_admission_queues

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 8
LOAD_THREADS = 4


@pytest.fixture
def lockless_shortcut() -> Iterator[None]:
    """The bug the test must catch: the shortcut without its look at the team's lock, so an
    admission that counted the finished execution and has not committed its queued row yet is
    not waited for. The installed function is replaced by its own source (pg_get_functiondef,
    so the variant cannot drift) with that look turned off."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('mantle_promotion_owed'::regproc)")
        original = cursor.fetchone()[0]
        look = "IF EXISTS (SELECT 1 FROM pg_locks l"
        assert original.count(look) == 1
        cursor.execute(original.replace(look, "IF false AND EXISTS (SELECT 1 FROM pg_locks l"))
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(original)


def _load(team: Team, workflow, until: threading.Event) -> None:  # type: ignore[no-untyped-def]
    """Admissions into an unlimited workflow of another team, each finished at once: every
    finish runs the shortcut (nothing queued there), beside the race."""
    try:
        while not until.is_set():
            execution = execution_admit(team=team, workflow=workflow).execution
            with contextlib.suppress(Execution.DoesNotExist):
                execution_finish(execution.id, status=Status.COMPLETED)
    finally:
        connections.close_all()


class _LimitSampler(threading.Thread):
    """The workflow's slot holders, sampled continuously: the shortcut must not break the
    limit either."""

    def __init__(self, workflow_id: int) -> None:
        super().__init__()
        self.workflow_id, self.most, self.samples = workflow_id, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.is_set():
                holders = Execution.objects.filter(
                    workflow_id=self.workflow_id, status__in=(Status.PENDING, Status.RUNNING)
                ).count()
                self.most, self.samples = max(self.most, holders), self.samples + 1
                time.sleep(0.005)
        finally:
            connections.close_all()


def _races_under_load(make_team, make_workflow) -> list[str]:  # type: ignore[no-untyped-def]
    """ROUNDS times: a holder of a limit-1 workflow finishes while an admission that counted it
    holds its queued row uncommitted; other teams' admissions and finishes run throughout.
    Returns the status of each round's queued execution once the finish has returned."""
    team = make_team()
    workflow = make_workflow(team, limit=1)
    other = make_team()
    unlimited = make_workflow(other, limit=0)
    stop = threading.Event()
    load = [
        threading.Thread(target=_load, args=(other, unlimited, stop)) for _ in range(LOAD_THREADS)
    ]
    watch = _LimitSampler(workflow.id)
    for thread in [*load, watch]:
        thread.start()
    statuses = []
    try:
        for _ in range(ROUNDS):
            queued = _finish_while_an_admission_queues(team, workflow)
            statuses.append(queued.status)
            # Room for the next round's holder: the one promoted (or left queued) ends.
            for execution in Execution.objects.filter(
                workflow=workflow, status__in=(Status.QUEUED, Status.PENDING)
            ):
                execution_finish(execution.id, status=Status.CANCELLED)
    finally:
        stop.set()
        watch.done.set()
        for thread in [*load, watch]:
            thread.join()
    assert watch.samples > 0 and watch.most <= 1
    assert Execution.objects.filter(workflow=unlimited).count() > 0
    return statuses


def test_the_lockless_shortcut_loses_no_promotion_under_load(make_team, make_workflow):
    assert _races_under_load(make_team, make_workflow) == [Status.PENDING] * ROUNDS


def test_without_its_look_at_the_lock_the_shortcut_loses_promotions(
    make_team, make_workflow, lockless_shortcut
):
    """Proof that the test catches the bug: the admission's queued row, not yet committed when
    the shortcut looks, is left queued beside a free slot."""
    assert Status.QUEUED in _races_under_load(make_team, make_workflow)
