"""Teams and workflows the benchmarks admit into, created once in `mantle_bench`.

Each fleet is a list of teams, each with an `open` workflow (no limit: every admission is
`pending`), a `limited` one (4 slots, `on_limit: queue`: once full, admissions queue) and a
`chain` one (1 slot: each completion promotes the next, for the latency figure). They
are created in one sequence, so their ids form arithmetic progressions, which the pgbench script
uses to pick a random team the way the Python clients do.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from django.db import connection

from teams.models import Team
from teams.services import team_create
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

KINDS = {"open": 0, "limited": 4, "chain": 1}


NOOP = "  - name: only\n    action: test/noop\n"


def workflow_yaml(name: str, limit: int, steps: str = NOOP) -> str:
    return f"name: {name}\nmax_parallel_executions: {limit}\non_limit: queue\nsteps:\n{steps}"


@dataclass(frozen=True)
class Target:
    team: Team
    workflow: WorkflowDefinition  # current_version loaded: admission reads it without a query


def target(team: Team, name: str) -> Target:
    workflow = WorkflowDefinition.objects.select_related("current_version").get(
        team=team, name=name
    )
    return Target(team=team, workflow=workflow)


# Distinct id ranges, so each value in a captured admission names one variable (bench.pgbench).
_SEQUENCES = {
    "teams_team_id_seq": 1_000,
    "workflows_workflowdefinition_id_seq": 2_000_000,
    "workflows_workflowversion_id_seq": 3_000_000,
}


def _separate_id_ranges() -> None:
    with connection.cursor() as cursor:
        for sequence, start in _SEQUENCES.items():
            cursor.execute(
                "SELECT setval(%s, %s) WHERE (SELECT last_value FROM " + sequence + ") < %s",
                [sequence, start, start],
            )


def fleet(prefix: str, size: int, kind: str) -> list[Target]:
    """`size` unlimited teams named `<prefix>-<n>`, each with both workflows."""
    _separate_id_ranges()
    targets = []
    for n in range(size):
        slug = f"{prefix}-{n:03d}"
        team = Team.objects.filter(slug=slug).first()
        if team is None:
            team = team_create(slug=slug, max_concurrent_executions=0)
            for name, limit in KINDS.items():
                workflow_apply(team=team, content=workflow_yaml(name, limit))
        targets.append(target(team, kind))
    return targets


def progression(values: list[int]) -> tuple[int, int]:
    """(first, step) of values in arithmetic progression; ValueError otherwise."""
    step = values[1] - values[0] if len(values) > 1 else 0
    if any(b - a != step for a, b in itertools.pairwise(values)):
        raise ValueError(f"ids are not an arithmetic progression: {values[:5]}…")
    return values[0], step


def clear_admitted(*targets: Target) -> None:
    """Remove what a round admitted into the targets' workflows, keep the finished rows a figure
    loaded; VACUUM so the dead index entries of deleted rows do not slow the next round."""
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM executions_execution WHERE workflow_id = ANY(%s) AND status IN "
            "('pending', 'queued', 'running')",
            [[target.workflow.id for target in targets]],
        )
        cursor.execute("TRUNCATE django_q_ormq, executions_rejection")
        cursor.execute("VACUUM (ANALYZE) executions_execution")
