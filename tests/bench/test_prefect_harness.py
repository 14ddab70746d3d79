"""Figure 10's Prefect harness believes only output that can stand for the figure
(docs/performance.md, Step-scope hand-off): the parser of the peer's process output, fed what
a peer that crashed, lost count or ignored its limit would print."""

from __future__ import annotations

import json

import pytest

from bench.prefect_server import PeerOutputError, parse

# Three limited tasks under a limit of 2: two at once, the third granted 20 ms after the first
# release.
INTERVALS = [(0.0, 1.0), (0.5, 1.5), (1.02, 2.0)]


def _output(**changes: object) -> str:
    result = {"count": 3, "done": 3, "failed": 0, "seconds": 2.5, "intervals": INTERVALS}
    return "log line\nRESULT " + json.dumps({**result, **changes}) + "\n"


def test_a_sound_result_is_measured():
    result = parse(_output(), 0, executions=3, limit=2)
    assert (result.measure.done, result.measure.max_running) == (3, 2)
    assert result.measure.rate == pytest.approx(3 / 2.5)
    assert result.handoffs_ms == pytest.approx([20.0])


def test_failed_tasks_come_with_their_errors():
    errors = ["ReadTimeout: timed out"]
    result = parse(_output(failed=1, errors=errors), 0, executions=3, limit=2)
    assert (result.measure.failed, result.errors) == (1, errors)


def test_a_result_cut_at_the_deadline_is_measured_as_cut():
    result = parse(_output(done=2, intervals=INTERVALS[:2]), 0, executions=3, limit=2)
    assert not result.measure.finished
    assert result.measure.rate == pytest.approx(2 / 2.5)


@pytest.mark.parametrize(
    ("stdout", "returncode", "refusal"),
    [
        (_output(), 1, "exit 1"),
        ("Traceback (most recent call last):\n", 0, "0 RESULT lines"),
        (_output() + _output(), 0, "2 RESULT lines"),
        (_output(count=2), 0, "count 2 of 3"),
        (_output(done=4), 0, "done 4"),
        (_output(failed=4), 0, "failed 4"),
        (_output(seconds=0), 0, "count 3 of 3"),
        (_output(intervals=INTERVALS[:1]), 0, "1 limited intervals for 3 done"),
        (_output(intervals=[(0.0, 1.0), (2.0, 1.5), (1.5, 2.0)]), 0, "limited intervals"),
        (_output(intervals=[(0.0, 1.0), (0.1, 1.0), (0.2, 1.0)]), 0, "3 limited tasks at once"),
    ],
)
def test_output_that_cannot_stand_for_the_figure_is_refused(stdout, returncode, refusal):
    with pytest.raises(PeerOutputError, match=refusal):
        parse(stdout, returncode, executions=3, limit=2)
