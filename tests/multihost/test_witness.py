"""The failover tests' fencing check can fail: the step witness, a real HTTP server called over
real connections, reports two attempts of one step that ran at the same time. An engine without
fencing produces exactly that: an attempt taken over after its lease (the reaper) while its first
owner still works, or a claim of a step already running, calls the witness a second time while
the first call is held. Calls of different steps, or of one step one after the other (a retry),
are not reported."""

from __future__ import annotations

import threading

import httpx

from tests.multihost.witness import Call, StepWitness, overlapping


def call(witness: StepWitness, execution: str, step: str) -> None:
    body = {"execution": execution, "step": step}
    assert httpx.post(witness.url, json=body, timeout=10).status_code == 200


def test_two_attempts_of_one_step_at_once_are_reported() -> None:
    with StepWitness("127.0.0.1", hold=0.3) as witness:
        both = [threading.Thread(target=call, args=(witness, "e1", "work")) for _ in range(2)]
        for thread in both:
            thread.start()
        for thread in both:
            thread.join()
        call(witness, "e2", "work")  # a retry after the first attempt ended: no overlap
        call(witness, "e2", "work")
        apart = [threading.Thread(target=call, args=(witness, "e3", s)) for s in ("a", "b")]
        for thread in apart:
            thread.start()
        for thread in apart:
            thread.join()
        pairs = witness.overlapping()
        assert witness.runs() == {
            ("e1", "work"): 2,
            ("e2", "work"): 2,
            ("e3", "a"): 1,
            ("e3", "b"): 1,
        }
    assert [(first.execution, second.execution) for first, second in pairs] == [("e1", "e1")]


def test_an_attempt_inside_a_long_one_is_reported_after_a_short_one_between() -> None:
    long, short, inside = Call("e", "s", 0, 10), Call("e", "s", 1, 2), Call("e", "s", 5, 6)
    assert overlapping([inside, short, long]) == [(long, short), (long, inside)]
    assert overlapping([Call("e", "s", 0, 1), Call("e", "s", 1, 2)]) == []
