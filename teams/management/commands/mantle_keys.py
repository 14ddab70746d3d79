"""`mantle keys create --team <slug>`: print a new API key once (only its hash is stored)."""

from __future__ import annotations

from typing import Any

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

    def handle(self, *args: Any, team: str, name: str, **options: Any) -> None:
        try:
            owner = Team.objects.get(slug=team)
        except Team.DoesNotExist as exc:
            raise CommandError(f"unknown team {team!r}", returncode=2) from exc
        _, key = api_key_create(team=owner, name=name)
        self.stdout.write(key)
