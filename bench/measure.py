"""What a scenario of figures 5, 6 and 10 measured, on either side (Mantle or the peer), the
most intervals seen overlapping, and the hand-offs between them. Free of Django: the peers'
processes and harnesses import it too."""

from __future__ import annotations

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
