"""What a scenario of figures 5 and 6 measured, on either side (Mantle or the peer), and the
most intervals seen overlapping. Free of Django: the peer's process imports it too."""

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
