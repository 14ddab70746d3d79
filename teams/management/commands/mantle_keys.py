"""`mantle keys create --team <slug> [--user <username>]`: print a new API key once (only its
hash is stored); a key acting for a staff user may also set global named limits."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from teams.models import Team
from teams.services import api_key_create


class Command(BaseCommand):
    help = "Create API keys."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="create an API key for a team")
        create.add_argument("--team", required=True)
        create.add_argument("--name", default="")
        create.add_argument(
            "--user", help="the user it acts for: a staff user's key may set global limits"
        )

    def handle(self, *args: Any, team: str, name: str, user: str | None, **options: Any) -> None:
        try:
            owner = Team.objects.get(slug=team)
        except Team.DoesNotExist as exc:
            raise CommandError(f"unknown team {team!r}", returncode=2) from exc
        acting = None
        if user is not None:
            acting = User.objects.filter(username=user).first()
            if acting is None:
                raise CommandError(f"unknown user {user!r}", returncode=2)
        _, key = api_key_create(team=owner, name=name, user=acting)
        self.stdout.write(key)
