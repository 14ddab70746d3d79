"""`mantle pause workflow <name> --team <t> | team <t> | limit <name> --team <t>
[--cancel-running]` (docs/cli.md, mantle pause and mantle resume): exit 0 done (also when it
already was paused), 2 bad usage or unknown target."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from executions.services.pauses import (
    PauseChange,
    limit_pause_set,
    team_pause_set,
    workflow_pause_set,
)
from teams.models import NamedLimit, Team
from workflows.models import WorkflowDefinition


class Command(BaseCommand):
    help = "Pause a workflow, a team or a named limit: nothing of it becomes pending until resumed."
    paused = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", choices=["workflow", "team", "limit"])
        parser.add_argument("name", help="the workflow's or named limit's name, or the team's slug")
        parser.add_argument("--team", help="the team of the workflow or named limit")
        if self.paused:
            parser.add_argument(
                "--cancel-running",
                action="store_true",
                help="also cancel what is pending or running (else it finishes)",
            )

    def handle(self, *args: Any, kind: str, name: str, team: str | None, **options: Any) -> None:
        cancel = bool(options.get("cancel_running"))
        if kind == "team":
            change = team_pause_set(team=_team(name), paused=self.paused, cancel_running=cancel)
        elif team is None:
            raise CommandError(f"{kind} {name}: --team is required", returncode=2)
        elif kind == "workflow":
            workflow = WorkflowDefinition.objects.filter(team=_team(team), name=name).first()
            if workflow is None:
                raise CommandError(f"no workflow {name!r} in team {team!r}", returncode=2)
            change = workflow_pause_set(
                workflow=workflow, paused=self.paused, cancel_running=cancel
            )
        else:
            limit = NamedLimit.objects.filter(team=_team(team), name=name).first()
            if limit is None:
                raise CommandError(f"no named limit {name!r} in team {team!r}", returncode=2)
            change = limit_pause_set(limit=limit, paused=self.paused, cancel_running=cancel)
        self.stdout.write(_describe(f"{kind} {name}", change))


def _team(slug: str) -> Team:
    team = Team.objects.filter(slug=slug).first()
    if team is None:
        raise CommandError(f"no team {slug!r}", returncode=2)
    return team


def _describe(target: str, change: PauseChange) -> str:
    state = "paused" if change.paused else "resumed"
    if not change.changed:
        state = f"already {'paused' if change.paused else 'running (not paused)'}"
    details = []
    if change.cancelled:
        details.append(f"{change.cancelled} cancelled")
    if change.promoted:
        details.append(f"{change.promoted} promoted")
    return f"{target} {state}" + (f" ({', '.join(details)})" if details else "")
