"""`mantle serve` upserts django-q2's schedules as it starts, and machines sharing one database
start together: each declared schedule must exist once, or every later start fails on the
duplicates (django-q2's Schedule.name is not unique). Without the schedules' lock the same
starts make duplicates."""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError
from django_q.models import Schedule

from core import locks
from engine import schedules
from tests.concurrency.harness import is_deadlock, run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

STARTS = 8


def round_with_a_duplicate(rounds: int) -> int | None:
    """Round after round from no schedules, STARTS upserts at once: the first round after which
    a declared schedule had more than one row, or None."""
    for round_ in range(rounds):
        Schedule.objects.filter(name__startswith="mantle-").delete()
        try:
            run_in_threads([schedules.upsert_schedules] * STARTS, threads=STARTS)
        except OperationalError as error:
            # Two starts deadlock only while each deletes the duplicates it found of a
            # schedule, the other's row among them: duplicates were made.
            if not is_deadlock(error):
                raise
            return round_
        if any(Schedule.objects.filter(name=name).count() > 1 for name in schedules.SCHEDULES):
            return round_
    return None


def test_machines_starting_together_make_each_schedule_once() -> None:
    assert round_with_a_duplicate(20) is None


def test_without_the_lock_starts_together_duplicate_a_schedule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Instead of the lock, the starts meet where they would take it: they then read the
    # schedules together, each finds none and creates one (left to chance, a round in ten
    # duplicated on a loaded machine and none in 200 rounds on a quiet one).
    together = threading.Barrier(STARTS, timeout=30)
    monkeypatch.setattr(locks, "lock_schedules", together.wait)
    assert round_with_a_duplicate(20) is not None


def test_a_start_merges_duplicates_and_drops_schedules_no_longer_declared() -> None:
    Schedule.objects.filter(name__startswith="mantle-").delete()
    name = "mantle-prune"
    made = [
        Schedule.objects.create(name=name, func="engine.tasks.prune", minutes=5) for _ in range(3)
    ]
    Schedule.objects.create(name="mantle-engine-clock", func="engine.tasks.engine_clock")
    theirs = Schedule.objects.create(name="nightly-report", func="reports.nightly")
    schedules.upsert_schedules()
    kept = Schedule.objects.get(name=name)
    assert kept.pk == made[0].pk
    assert (kept.func, kept.schedule_type) == ("engine.tasks.prune", Schedule.HOURLY)
    assert not Schedule.objects.filter(name="mantle-engine-clock").exists()
    assert Schedule.objects.filter(pk=theirs.pk).exists()
