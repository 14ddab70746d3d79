"""`mantle apply <file.yaml>… --team <slug>`: store each file as its workflow's next version
(nothing is written for a file whose content is unchanged, nor for any file when one is
invalid)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from core.terminal import printable
from teams.models import Team
from workflows.management.commands.mantle_validate import read_workflow_file, write_warnings
from workflows.schema import WorkflowInvalid
from workflows.services import workflow_apply


class Command(BaseCommand):
    help = "Create or update workflows from YAML files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+")
        parser.add_argument("--team", required=True, help="the team's slug")

    def handle(self, *args: Any, files: list[str], team: str, **options: Any) -> None:
        try:
            owner = Team.objects.get(slug=team)
        except Team.DoesNotExist as exc:
            raise CommandError(f"unknown team {team!r}", returncode=2) from exc
        contents = {path: read_workflow_file(path) for path in files}
        with transaction.atomic():
            for path, content in contents.items():
                try:
                    applied = workflow_apply(team=owner, content=content)
                except WorkflowInvalid as exc:
                    for error in exc.errors:
                        self.stderr.write(f"{path}:{printable(error)}")
                    raise CommandError(f"{path} is invalid; nothing applied", returncode=1) from exc
                write_warnings(self.stderr, path, applied.warnings)
                state = (
                    "created" if applied.created else "updated" if applied.changed else "unchanged"
                )
                self.stdout.write(f"{applied.workflow.name} v{applied.version.number} {state}")
