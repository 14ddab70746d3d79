"""Rate limits under concurrency (CONTRACT §9), the issue's burst: 100 admissions in threads
against `max: 10, period: 2s` while the real engine clock promotes as the window slides: never
more than 10 became pending in any 2 s window (checked over the rows' pending_at), and the first
promotion within 1 s of the moment the window first admits one; rejected at once, every
Retry-After is the real wait ±1 s; without locks the same burst breaks the rate."""

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
# The windows the test waits to slide (~8 s): the rest of the burst stays queued.
WATCHED = 5 * MAX


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


def test_a_burst_is_admitted_at_the_rate_and_promoted_as_the_window_slides(
    team, make_workflow, engine_clock
):
    outcomes = burst(make_workflow, team, status)
    assert outcomes.count("pending") <= MAX
    started = Execution.objects.filter(pending_at__isnull=False)
    deadline = time.monotonic() + 15
    while started.count() < WATCHED and time.monotonic() < deadline:
        time.sleep(0.1)
    rows = list(started.order_by("pending_at").values_list("pending_at", "promoted_at"))
    assert len(rows) >= WATCHED, f"{len(rows)} of {WATCHED} became pending within 15 s"
    became_pending = [at for at, _ in rows]
    assert most_in_a_window(became_pending) <= MAX
    # The window first admits one when the burst's first leaves it; the clock ticks every 0.25 s.
    first_promotion = min(promoted for _, promoted in rows if promoted is not None)
    lateness = (first_promotion - (became_pending[0] + PERIOD)).total_seconds()
    print(
        f"\nrate {MAX}/2s, burst of {BURST}: {len(rows)} pending, at most"
        f" {most_in_a_window(became_pending)} in a window; first promotion {lateness:.3f} s"
        " after its earliest moment"
    )
    assert 0 <= lateness < 1


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
    assert len(rejections) == BURST - MAX
    assert Execution.objects.count() == MAX  # a rejection writes nothing
    window_frees = Execution.objects.earliest("pending_at").pending_at + PERIOD
    # The real wait, seen from before the request and from its answer: Retry-After (whole
    # seconds, rounded up) is never shorter than the wait once answered (obeying it is never
    # early) and at most a second longer than the wait when asked.
    waits = [
        (
            retry_after,
            (window_frees - answered).total_seconds(),
            (window_frees - asked).total_seconds(),
        )
        for retry_after, asked, answered in rejections
    ]
    print(
        f"\n{len(rejections)} rejected at once: Retry-After {sorted({r for r, _, _ in waits})},"
        f" real waits {min(w for _, w, _ in waits):.2f}-{max(w for _, _, w in waits):.2f} s"
    )
    assert all(answered <= retry_after <= asked + 1 for retry_after, answered, asked in waits)


def test_without_locks_the_same_burst_breaks_the_rate(team, make_workflow, without_locks):
    """Proof that the test catches the bug: without locks more than 10 start within 2 s."""
    burst(make_workflow, team, status)
    became_pending = sorted(
        Execution.objects.filter(pending_at__isnull=False).values_list("pending_at", flat=True)
    )
    print(f"\nwithout locks: {most_in_a_window(became_pending)} in one window (rate {MAX})")
    assert most_in_a_window(became_pending) > MAX
