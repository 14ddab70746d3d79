"""`mantle seed-demo`: the `demo` team with its named limit `prod-db`, the example workflows, an
API key and an admin sign-in, for `make run`. Safe to run again: workflows only get a new version
when their file changed, a `prod-db` that exists keeps its max, and the key and the password kept
in .mantle/credentials stay as they are while they still work (teams.credentials)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from teams.credentials import credentials_path, demo_credentials_ensure
from teams.models import NamedLimit, Team
from teams.services import named_limit_set, team_create
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
        seeded = demo_credentials_ensure(team=team)
        saved = _shown(credentials_path())
        sign_in = f"sign in at http://{settings.MANTLE.server.bind}/ as {seeded.username}"
        lines = [f"\nteam demo, limit {team.effective_limit or 'unlimited'}"]
        if seeded.key_created:
            lines.append(f"API key (new): {seeded.key}")
        if seeded.admin_created:
            lines.append(f"{sign_in} / {seeded.password}")
        else:
            lines.append(f"{sign_in} (password unchanged)")
        if seeded.password is None:
            lines.append(f"(the password of {seeded.username} was changed: it is not in {saved})")
        new = seeded.key_created or seeded.admin_created
        lines.append(f"credentials {'saved' if new else 'unchanged'} in {saved} (yours only)")
        lines.append(f"`. {saved}` sets $MANTLE_KEY; `mantle admin reset-password`: a new one\n")
        self.stdout.write("\n".join(lines))


def _shown(path: Path) -> str:
    """The path as the user would type it from here."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)
