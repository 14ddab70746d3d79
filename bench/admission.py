"""Figure 1: admission throughput through the service against pgbench running the identical SQL.

For each fleet (one hot team, 100 teams), each workflow kind (`open`: every admission is
pending; `limited`: most queue) and each client count, rounds alternate pgbench and the service
on emptied tables, so growth of the table in one round does not bias the next.
"""

from __future__ import annotations

from bench import database, fixtures, pgbench, throughput
from bench.report import Report, ratio_row

GOAL_AT_16 = 0.70


def run(
    report: Report,
    *,
    url: str,
    fleets: dict[str, list[fixtures.Target]],
    clients: list[int],
    seconds: int,
    rounds: int,
) -> None:
    """Report rows: the service's median rate against pgbench's, per scenario and clients."""
    report.notes.append(
        "figure 1: the service runs execution_admit(), one autocommit call of the PL/pgSQL function"
        " mantle_admit (locks, state read, decision, execution insert); pgbench runs the same"
        " statements one round trip each in one transaction (BEGIN; the advisory locks; the"
        " named-limit lookup; the state read; the mark and the execution insert, or the insert"
        " and the queue position when queued; END; then the workers' wake-up when pending),"
        " -M prepared"
    )
    for scenario, targets in fleets.items():
        database.truncate_executions()
        script = pgbench.script(targets)
        with pgbench.script_file(script) as path:
            for count in clients:
                ours: list[float] = []
                limit: list[float] = []
                for round_ in range(rounds):
                    order = ("service", "pgbench") if round_ % 2 else ("pgbench", "service")
                    for side in order:
                        database.truncate_executions()
                        if side == "pgbench":
                            limit.append(pgbench.run(path, clients=count, seconds=seconds, url=url))
                        else:
                            ours.append(throughput.service(targets, clients=count, seconds=seconds))
                row = ratio_row(
                    "1 admission",
                    f"{scenario}, {count} clients (vs pgbench)",
                    ours,
                    limit,
                    "/s",
                    GOAL_AT_16 if count == 16 else 0,
                )
                report.add(row)
    database.truncate_executions()
