"""What a scenario of figures 5, 6 and 10 measured, on either side (Mantle or the peer), the
most intervals seen overlapping, and the hand-offs between them. Free of Django: the peers'
processes and harnesses import it too."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Measure:
    count: int  # units of work (executions, steps, workflows) asked for
    seconds: float  # from the first submission to the last completion
    done: int  # of them, finished within the deadline (completed or failed)
    failed: int = 0
    max_running: int = 0  # most steps seen running at once, from their start and end times
    latencies_ms: list[float] = field(default_factory=list)
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # by part (bench.cpu)

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds else float("nan")

    @property
    def finished(self) -> bool:
        return self.done == self.count

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals (start, end) that contain one instant; an end at the instant of another
    interval's start does not overlap it."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = most = 0
    for _, delta in events:
        running += delta
        most = max(most, running)
    return most


def handoffs_ms(intervals: list[tuple[float, float]], skip: int) -> list[float]:
    """For each interval (start, end) that started after the first `skip` (those found a unit
    free), the time from the latest end before its start to its start, in milliseconds."""
    starts = sorted(start for start, _ in intervals)[skip:]
    ends = sorted(end for _, end in intervals)
    gaps, i = [], 0
    for start in starts:
        while i < len(ends) and ends[i] <= start:
            i += 1
        if i:
            gaps.append((start - ends[i - 1]) * 1000)
    return gaps


@dataclass(frozen=True)
class UnitBudget:
    """Where a limit's unit-seconds (its units times the window) went: before each unit's first
    holder started (ramp), held by steps (held), between a holder's end and the next holder's
    start (idle: `waiting` when a step was already waiting at that end, `starved` when none was
    yet), after each unit's last holder ended (tail). Units are interchangeable, so the k-th
    start is paired with the (k - units)-th end; the sums do not depend on the pairing."""

    ramp: float
    held: float
    waiting: float
    starved: float
    tail: float
    span: float  # from the first holder's start to the last holder's end
    holds_ms: list[float]
    idles_ms: list[float]  # one per pair, in start order

    @property
    def total(self) -> float:
        return self.ramp + self.held + self.waiting + self.starved + self.tail


def unit_budget(
    steps: list[tuple[float, float, float]], units: int, began: float, ended: float
) -> UnitBudget:
    """The budget of a limit of `units` over the window [began, ended], from its holders'
    (created, started, ended) times; every holder ended."""
    creates = sorted(created for created, _, _ in steps)
    starts = sorted(start for _, start, _ in steps)
    ends = sorted(end for _, _, end in steps)
    waiting = starved = 0.0
    idles = []
    for start, freed in zip(starts[units:], ends, strict=False):
        idle = start - freed
        idles.append(idle * 1000)
        if bisect_right(creates, freed) > bisect_right(starts, freed):
            waiting += idle
        else:
            starved += idle
    return UnitBudget(
        ramp=sum(start - began for start in starts[:units]),
        held=sum(end - start for _, start, end in steps),
        waiting=waiting,
        starved=starved,
        tail=sum(ended - end for end in ends[-units:]),
        span=ends[-1] - starts[0],
        holds_ms=[(end - start) * 1000 for _, start, end in steps],
        idles_ms=idles,
    )
