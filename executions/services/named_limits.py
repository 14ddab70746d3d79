"""Deleting a team's named limit, refused while anything uses it: a workflow whose current
version lists it (for its executions or one of its steps), or a live execution that holds or
waits for one of its slots or units (its row names the limit; the count of holders would
silently lose it)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from core import locks
from executions.models import QUEUED_OR_HOLDING, Execution, StepStatus
from teams.models import NamedLimit, Team
from workflows.models import WorkflowDefinition

# A step holding (running) or waiting for a step-scope limit.
LIVE_STEPS = (StepStatus.WAITING, StepStatus.RUNNING)


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
        # Listed by the workflow (execution scope) or by one of its steps (step scope).
        workflows = sorted(
            WorkflowDefinition.objects.filter(team=team)
            .filter(
                Q(current_version__limits__contains=[name])
                | Q(current_version__spec__contains={"steps": [{"limits": [{"name": name}]}]})
            )
            .values_list("name", flat=True)
        )
        executions = (
            Execution.objects.filter(
                Q(team=team, status__in=QUEUED_OR_HOLDING, named_limits__contains=[limit.id])
                | Q(steps__status__in=LIVE_STEPS, steps__limit_ids__contains=[limit.id])
            )
            .distinct()
            .count()
        )
        if workflows or executions:
            raise NamedLimitInUse(name=name, workflows=workflows, executions=executions)
        limit.delete()
    return True
