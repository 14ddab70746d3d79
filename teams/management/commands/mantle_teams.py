"""`mantle teams create|set-limit|list`: teams and their concurrency limits."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from teams.cli import non_negative, team_get, validation_messages
from teams.models import Team
from teams.services import team_create, team_set_limit


class Command(BaseCommand):
    help = "Create teams, set or clear their concurrency limit, list them."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="create a team")
        create.add_argument("slug")
        create.add_argument("--name", default="")
        create.add_argument("--max-concurrent", type=non_negative, help="its limit (0 = unlimited)")
        set_limit = actions.add_parser("set-limit", help="set or clear a team's limit")
        set_limit.add_argument("slug")
        choice = set_limit.add_mutually_exclusive_group(required=True)
        choice.add_argument("limit", nargs="?", type=non_negative)
        choice.add_argument("--clear", action="store_true", help="use the mantle.yaml default")
        actions.add_parser("list", help="list teams with their limits")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, action.replace("-", "_"))(**options)

    def create(self, *, slug: str, name: str, max_concurrent: int | None, **_: Any) -> None:
        try:
            team = team_create(slug=slug, name=name, max_concurrent_executions=max_concurrent)
        except ValidationError as exc:
            raise CommandError(validation_messages(exc), returncode=2) from exc
        self.stdout.write(f"{team.slug} created, limit {_describe(team)}")

    def set_limit(self, *, slug: str, limit: int | None, clear: bool, **_: Any) -> None:
        team = team_get(slug)
        team_set_limit(team=team, max_concurrent_executions=None if clear else limit)
        self.stdout.write(f"{team.slug} limit {_describe(team)}")

    def list(self, **_: Any) -> None:
        for team in Team.objects.all():
            self.stdout.write(f"{team.slug}\t{_describe(team)}")


def _describe(team: Team) -> str:
    limit = team.effective_limit
    shown = "unlimited" if limit == 0 else str(limit)
    return shown if team.max_concurrent_executions is not None else f"{shown} (config default)"
