"""Rate limits under concurrency (CONTRACT §9): a burst of admissions in threads against
`max: 10, period: 1s` while the real engine clock promotes as the window slides: never more than
10 became pending in any 1 s window (checked over the rows' pending_at), and the first promotion
within 1 s of the moment the window first admits one; without locks the same burst breaks it."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest

from executions.models import Execution
from executions.services.admission import execution_admit
from tests.concurrency.harness import run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

MAX, PERIOD, BURST = 10, timedelta(seconds=1), 30


def burst(make_workflow, team) -> list[str]:
    workflow = make_workflow(team, "rated", extra=f"rate_limit: {{max: {MAX}, period: 1s}}\n")
    jobs = [lambda: execution_admit(team=team, workflow=workflow).status for _ in range(BURST)]
    return run_in_threads(jobs, threads=8)  # type: ignore[return-value]


def most_in_a_window(became_pending: list[datetime]) -> int:
    """The most that became pending within PERIOD of one another (sorted times)."""
    return max(
        len([at for at in became_pending[i:] if at < start + PERIOD])
        for i, start in enumerate(became_pending)
    )


def test_a_burst_is_admitted_at_the_rate_and_promoted_as_the_window_slides(
    team, make_workflow, engine_clock
):
    outcomes = burst(make_workflow, team)
    assert outcomes.count("pending") <= MAX
    deadline = time.monotonic() + 10
    while Execution.objects.filter(status="queued").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    rows = list(Execution.objects.order_by("pending_at").values_list("pending_at", "promoted_at"))
    became_pending = [at for at, _ in rows]
    assert None not in became_pending, "every one of the burst was promoted within 10 s"
    assert most_in_a_window(became_pending) <= MAX
    # The window first admits one when the burst's first leaves it; the clock ticks every 0.25 s.
    first_promotion = min(promoted for _, promoted in rows if promoted is not None)
    lateness = (first_promotion - (became_pending[0] + PERIOD)).total_seconds()
    print(
        f"\nrate {MAX}/1s, burst of {BURST}: at most {most_in_a_window(became_pending)} in a"
        f" window; first promotion {lateness:.3f} s after its earliest moment"
    )
    assert 0 <= lateness < 1


def test_without_locks_the_same_burst_breaks_the_rate(team, make_workflow, without_locks):
    """Proof that the test catches the bug: without locks more than 10 start within 1 s."""
    burst(make_workflow, team)
    became_pending = sorted(
        Execution.objects.filter(pending_at__isnull=False).values_list("pending_at", flat=True)
    )
    print(f"\nwithout locks: {most_in_a_window(became_pending)} in one window (rate {MAX})")
    assert most_in_a_window(became_pending) > MAX
