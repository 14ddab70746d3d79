"""Figure 10's unit budget (docs/performance.md, Where a unit's time goes): the window's
unit-seconds split into before the first holders, held, idle (a step waiting or none yet) and
after the last holders, adding up to the units times the window."""

from __future__ import annotations

import pytest

from bench.measure import unit_budget

# Two units over [0, 4]: two steps hold them from 1 to 2, the next two (one created at 0, one at
# 2.2, after the units freed) from 2.5 to 3.5.
STEPS = [(0.0, 1.0, 2.0), (0.0, 1.0, 2.0), (0.0, 2.5, 3.5), (2.2, 2.5, 3.5)]


def test_the_parts_add_up_to_the_units_times_the_window():
    budget = unit_budget(STEPS, 2, 0.0, 4.0)
    assert (budget.ramp, budget.held, budget.tail) == pytest.approx((2.0, 4.0, 1.0))
    assert budget.total == pytest.approx(2 * 4.0)
    assert budget.span == pytest.approx(2.5)
    assert budget.idles_ms == pytest.approx([500.0, 500.0])


def test_an_idle_unit_is_starved_only_when_no_step_was_waiting_at_its_end():
    budget = unit_budget(STEPS, 2, 0.0, 4.0)
    assert (budget.waiting, budget.starved) == pytest.approx((1.0, 0.0))  # one created at 0
    late = unit_budget([STEPS[0], STEPS[1], STEPS[3], STEPS[3]], 2, 0.0, 4.0)
    assert (late.waiting, late.starved) == pytest.approx((0.0, 1.0))
