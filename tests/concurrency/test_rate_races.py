"""Rate limits under concurrency (docs/limits.md), a burst: 100 admissions in threads
against `max: 10, period: 2s` while the real engine clock promotes as the window slides: never
more than 10 became pending in any 2 s window (checked over all 100 rows' pending_at, ~20 s),
each queued one promoted within 1 s of the moment the window admits it (the first included);
rejected at once, every Retry-After is the real wait ±1 s; without locks the same burst breaks
the rate."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from executions.models import Execution
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from tests.concurrency.harness import run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

MAX, PERIOD, BURST = 10, timedelta(seconds=2), 100
# The whole burst passes the window in BURST / MAX - 1 periods (18 s); the wait allows for load.
PASSED_WITHIN = 40


def burst(make_workflow, team, job, *, on_limit: str = "queue") -> list[object]:
    workflow = make_workflow(
        team, "rated", on_limit=on_limit, extra=f"rate_limit: {{max: {MAX}, period: 2s}}\n"
    )
    return run_in_threads([lambda: job(team, workflow) for _ in range(BURST)], threads=8)


def status(team, workflow) -> str:
    return execution_admit(team=team, workflow=workflow).status


def most_in_a_window(became_pending: list[datetime]) -> int:
    """The most that became pending within PERIOD of one another (sorted times)."""
    return max(
        len([at for at in became_pending[i:] if at < start + PERIOD])
        for i, start in enumerate(became_pending)
    )


def lateness(rows: list[tuple[datetime, datetime, datetime | None]]) -> list[float]:
    """Per promoted row (rows in pending_at order: created_at, pending_at, promoted_at), how long
    after the earliest moment it could have become pending: once queued, when the window admits
    it (the row MAX places before it leaves the window)."""
    return [
        (
            promoted - max(created, rows[n - MAX][1] + PERIOD if n >= MAX else created)
        ).total_seconds()
        for n, (created, _, promoted) in enumerate(rows)
        if promoted is not None
    ]


def test_a_burst_is_admitted_at_the_rate_and_promoted_as_the_window_slides(
    team, make_workflow, engine_clock
):
    outcomes = burst(make_workflow, team, status)
    assert outcomes.count("pending") <= MAX
    started = Execution.objects.filter(pending_at__isnull=False)
    deadline = time.monotonic() + PASSED_WITHIN
    while started.count() < BURST and time.monotonic() < deadline:
        time.sleep(0.25)
    rows = list(
        started.order_by("pending_at").values_list("created_at", "pending_at", "promoted_at")
    )
    assert len(rows) == BURST, f"{len(rows)} of {BURST} became pending within {PASSED_WITHIN} s"
    became_pending = [at for _, at, _ in rows]
    late = lateness(rows)
    print(
        f"\nrate {MAX}/2s, burst of {BURST}: {outcomes.count('pending')} admitted pending,"
        f" {len(late)} promoted, at most {most_in_a_window(became_pending)} in a 2 s window over"
        f" {(became_pending[-1] - became_pending[0]).total_seconds():.1f} s; promotion after its"
        f" earliest moment: first {late[0]:.3f} s, max {max(late):.3f} s"
    )
    assert most_in_a_window(became_pending) <= MAX
    assert min(late) >= 0 and max(late) < 1


def test_rejected_at_once_each_retry_after_is_the_real_wait(team, make_workflow):
    def rejection(team, workflow) -> tuple[int, datetime, datetime] | None:
        asked = timezone.now()
        try:
            execution_admit(team=team, workflow=workflow)
        except ConcurrencyLimitExceeded as rejected:
            assert (rejected.scope, rejected.limit) == ("rate", MAX)
            assert rejected.retry_after is not None
            return rejected.retry_after, asked, timezone.now()
        return None

    rejections = [r for r in burst(make_workflow, team, rejection, on_limit="reject") if r]
    # Under load the burst may outlast the window, even several (23 admitted under a load of 12):
    # then more than MAX are admitted, still at most MAX in any window, and a rejection writes
    # nothing.
    became_pending = sorted(Execution.objects.values_list("pending_at", flat=True))
    assert len(rejections) == BURST - len(became_pending) > 0
    assert most_in_a_window(became_pending) <= MAX

    def window_frees(at: datetime) -> datetime | None:
        """When the window as it stood at `at` admits one (None: it had room)."""
        inside = [moment for moment in became_pending if moment <= at]
        return inside[-MAX] + PERIOD if len(inside) >= MAX else None

    # The real wait, seen from before the request and from its answer: Retry-After (whole
    # seconds, rounded up) is never shorter than the wait once answered (obeying it is never
    # early) and at most a second longer than the wait when asked.
    waits = []
    for retry_after, asked, answered in rejections:
        frees_when_asked, frees_when_answered = window_frees(asked), window_frees(answered)
        assert frees_when_answered is not None  # it was full when the rejection was decided
        shortest = (frees_when_asked - answered).total_seconds() if frees_when_asked else 0.0
        waits.append((retry_after, shortest, (frees_when_answered - asked).total_seconds()))
    print(
        f"\n{len(rejections)} rejected ({len(became_pending)} admitted):"
        f" Retry-After {sorted({r for r, _, _ in waits})},"
        f" real waits {min(w for _, w, _ in waits):.2f}-{max(w for _, _, w in waits):.2f} s"
    )
    assert all(shortest <= retry_after <= longest + 1 for retry_after, shortest, longest in waits)


def test_without_locks_the_same_burst_breaks_the_rate(team, make_workflow, without_locks):
    """Proof that the test catches the bug: without locks more than 10 start within 2 s."""
    burst(make_workflow, team, status)
    became_pending = sorted(
        Execution.objects.filter(pending_at__isnull=False).values_list("pending_at", flat=True)
    )
    print(f"\nwithout locks: {most_in_a_window(became_pending)} in one window (rate {MAX})")
    assert most_in_a_window(became_pending) > MAX
