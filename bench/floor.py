"""Figure 6's floor: pgbench running the minimal durable work of one no-op execution, three
commits per pgbench transaction, 16 clients: the admission's insert (with the mark that keeps the
row's trigger from announcing it, as admission does: bench.pgbench), the claim's update
(pending → running) and the finish's update (running → completed) of that row. Mantle does that
and more (the step row, locks, the workers' wake-up, its Python) for each execution; its no-op
rate over this one says how far it stands from what the database itself allows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from bench import cpu, database, pgbench
from bench.fixtures import Target
from executions.sql import queries
from workflows.models import WorkflowDefinition

CLIENTS = 16
CLAIM = "UPDATE executions_execution SET status = 'running', started_at = now()"
FINISH = (
    "UPDATE executions_execution SET status = 'completed', blocked_by = NULL, completed_at = now()"
)


def script(definition: WorkflowDefinition) -> str:
    """The three commits, with the values of a real admission into `definition`."""
    target = Target(team=definition.team, workflow=definition)
    locked, _ = pgbench.capture_admission(target)
    variables = {
        "team_id": definition.team_id,
        "workflow_id": definition.id,
        "version_id": definition.current_version_id,
    }
    statements = dict(locked)
    mark = pgbench.statement(
        queries["admitted_announced_after_commit"],
        {**statements[queries["admitted_announced_after_commit"]], "id": uuid.uuid4()},
        {},
    )
    insert = pgbench.statement(
        queries["admission_insert"], statements[queries["admission_insert"]], {}
    )
    return "\n".join(
        [
            *(f"\\set {name} {value}" for name, value in variables.items()),
            "BEGIN;",
            mark,
            insert.removesuffix(";") + " RETURNING id AS execution_id \\gset",
            "END;",
            f"{CLAIM} WHERE id = :execution_id;",
            f"{FINISH} WHERE id = :execution_id;",
            "",
        ]
    )


@dataclass(frozen=True)
class Floor:
    rate: float  # no-op executions per second
    cpu_ms: float  # CPU of the database's backends per execution (bench.cpu)


def run(definition: WorkflowDefinition, *, seconds: int, url: str) -> Floor:
    """No-op executions per second pgbench's clients durably admit, claim and finish, and the
    backends' CPU for each."""
    try:
        with (
            pgbench.script_file(script(definition)) as path,
            cpu.Meter(database=database.NAME) as meter,
        ):
            rate = pgbench.run(path, clients=CLIENTS, seconds=seconds, url=url)
        return Floor(rate, meter.seconds[cpu.POSTGRES] * 1000 / (rate * seconds))
    finally:
        database.truncate_executions()
