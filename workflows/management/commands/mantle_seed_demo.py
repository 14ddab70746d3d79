"""`mantle seed-demo`: the `demo` team with its named limit `prod-db`, the example workflows, an
API key and an admin sign-in, for `make run`. Safe to run again: workflows only get a new version
when their file changed, and a `prod-db` that exists keeps its max."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from teams.models import NamedLimit, Team
from teams.services import api_key_create, named_limit_set, team_create
from workflows.services import workflow_apply


class Command(BaseCommand):
    help = "Seed the demo team, the example workflows, an API key and an admin user."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--examples", default=str(settings.BASE_DIR / "examples"))

    def handle(self, *args: Any, examples: str, **options: Any) -> None:
        team = Team.objects.filter(slug="demo").first() or team_create(slug="demo", name="Demo")
        if not NamedLimit.objects.filter(team=team, name="prod-db").exists():
            named_limit_set(team=team, name="prod-db", max=2)  # listed by examples/backfill.yaml
        for path in sorted(Path(examples).glob("*.yaml")):
            applied = workflow_apply(team=team, content=path.read_text())
            self.stdout.write(f"workflow {applied.workflow.name} v{applied.version.number}")
        _, key = api_key_create(team=team, name="make run")
        password = secrets.token_urlsafe(12)
        user, _ = get_user_model().objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        user.set_password(password)
        user.save()
        team.members.add(user)
        self.stdout.write(
            f"\nteam demo, limit {team.effective_limit or 'unlimited'}"
            f"\nAPI key (shown once): {key}"
            f"\nsign in at http://{settings.MANTLE.server.bind}/ as admin / {password}\n"
        )
