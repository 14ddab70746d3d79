"""The results table: printed, and written with the machine and the date into RESULTS.md."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


@dataclass
class Row:
    figure: str
    scenario: str
    mantle: str
    reference: str
    ratio: str
    goal: str = ""
    met: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(" | ".join(_cells(row)), flush=True)

    def fail(self, figure: str, error: BaseException) -> None:
        """A figure that could not run: a FAILED row, and `make bench` exits non-zero."""
        reason = f"{type(error).__name__}: {error}".splitlines()[0]
        self.failed.append(f"figure {figure} FAILED: {reason}")
        self.add(Row(figure, "could not run", reason, "", "", "", "FAILED"))


HEADER = ("figure", "scenario", "Mantle", "reference", "ratio", "goal", "met")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def ratio_row(
    figure: str, scenario: str, mantle: list[float], reference: list[float], unit: str, goal: float
) -> Row:
    ours, theirs = median(mantle), median(reference)
    ratio = ours / theirs if theirs else float("nan")
    return Row(
        figure,
        scenario,
        f"{ours:,.0f} {unit}",
        f"{theirs:,.0f} {unit}",
        f"{ratio:.2f}",
        f"≥ {goal:.2f}" if goal else "",
        ("yes" if ratio >= goal else "NO") if goal else "",
    )


def _cells(row: Row) -> tuple[str, ...]:
    return (row.figure, row.scenario, row.mantle, row.reference, row.ratio, row.goal, row.met)


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def write(report: Report, *, machine: dict[str, str], settings: str) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine_lines = "\n".join(f"- {key}: {value}" for key, value in machine.items())
    notes = "\n".join(f"- {note}" for note in report.notes)
    RESULTS.write_text(
        f"# Mantle benchmarks\n\n`make bench` ({settings}), {now}.\n\n"
        f"## Machine\n{machine_lines}\n\n## Results\n{table(report.rows)}\n\n"
        "Throughputs are medians of the rounds, each measured side by side with its reference "
        "in the same run; latencies are over every sample of the run.\n\n"
        f"## Notes\n{notes}\n"
    )
