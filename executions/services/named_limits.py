"""Deleting a team's named limit, refused while anything uses it: a workflow whose current
version lists it, or a live execution that holds or waits for one of its slots (its row names
the limit; the count of holders would silently lose it)."""

from __future__ import annotations

from django.db import transaction

from core import locks
from executions.models import LIVE, Execution
from teams.models import NamedLimit, Team
from workflows.models import WorkflowDefinition


class NamedLimitInUse(Exception):
    def __init__(self, *, name: str, workflows: list[str], executions: int) -> None:
        self.name = name
        self.workflows = workflows
        self.executions = executions
        uses = []
        if workflows:
            uses.append("listed by the workflow(s) " + ", ".join(workflows))
        if executions:
            uses.append(f"held or awaited by {executions} live execution(s)")
        super().__init__(f"named limit {name!r} is in use: {'; '.join(uses)}")


def named_limit_delete(*, team: Team, name: str) -> bool:
    """Delete the team's named limit; False when it does not exist. Raises NamedLimitInUse.
    Under the team's lock, which applies and admissions take: nothing starts using it meanwhile."""
    with transaction.atomic():
        locks.lock_team(team.id)
        limit = NamedLimit.objects.filter(team=team, name=name).first()
        if limit is None:
            return False
        workflows = sorted(
            WorkflowDefinition.objects.filter(
                team=team, current_version__limits__contains=[name]
            ).values_list("name", flat=True)
        )
        executions = Execution.objects.filter(
            team=team, status__in=LIVE, named_limits__contains=[limit.id]
        ).count()
        if workflows or executions:
            raise NamedLimitInUse(name=name, workflows=workflows, executions=executions)
        limit.delete()
    return True
