"""The results table: printed, and written with the machine and the date into RESULTS.md."""

from __future__ import annotations

import os
import re
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


# The figures a results row, a note or a rerun line speaks of: "10", "5 capacity",
# "figures 5 and 6: ...", "Figures 10, 11 rerun ...".
_FIGURES = re.compile(r"^(?:[Ff]igures? )?(\d+(?:(?:, | and )\d+)*)")


def _figures_of(text: str) -> set[int]:
    match = _FIGURES.match(text)
    return {int(n) for n in re.findall(r"\d+", match.group(1))} if match else set()


def update(report: Report, *, figures: set[int], settings: str) -> None:
    """RESULTS.md with the rows and notes of `figures` replaced by this run's (`python -m bench
    --only ... --update`), every other figure's as the runs before left them, and a line naming
    this run under the full run's."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = RESULTS.read_text().splitlines()
    names = ", ".join(str(n) for n in sorted(figures))
    load = ", ".join(f"{n:.2f}" for n in os.getloadavg())
    rerun = f"Figures {names} rerun ({settings}; load average at the end {load}), {now}."

    def replaced(line: str, prefix: str) -> bool:
        spoken_of = _figures_of(line[len(prefix) :]) if line.startswith(prefix) else set()
        return bool(spoken_of) and spoken_of <= figures

    first_row = next(i for i, line in enumerate(lines) if line.startswith("|---")) + 1
    last_row = max(i for i, line in enumerate(lines) if line.startswith("| ")) + 1
    rows = [line for line in lines[first_row:last_row] if not replaced(line, "| ")]
    rows += ["| " + " | ".join(_cells(row)) + " |" for row in report.rows]
    rows.sort(key=lambda line: min(_figures_of(line[2:]), default=0))
    head = [line for line in lines[:first_row] if not replaced(line, "")]
    after_full_run = next(i for i, line in enumerate(head) if line.startswith("`make bench`")) + 2
    head[after_full_run:after_full_run] = [rerun, ""]
    tail = [line for line in lines[last_row:] if not replaced(line, "- ")]
    notes = [line for line in tail if line.startswith("- ")] + [f"- {n}" for n in report.notes]
    notes.sort(key=lambda line: min(_figures_of(line[2:]), default=0))
    tail = [line for line in tail if not line.startswith("- ")] + notes
    RESULTS.write_text("\n".join(head + rows + tail) + "\n")
