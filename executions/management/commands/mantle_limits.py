"""`mantle limits set|list|delete`: a team's named limits, shared by the workflows that list
them (docs/limits.md). Exit 2 on bad usage (an unknown team, a bad name), 1 when a delete is refused
because the limit is in use."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from executions.selectors import named_limit_usage
from executions.services.named_limits import NamedLimitInUse, named_limit_delete
from teams.cli import non_negative, team_get, validation_messages
from teams.services import named_limit_set


class Command(BaseCommand):
    help = "Set, list and delete a team's named limits."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        set_ = actions.add_parser("set", help="create or change a named limit")
        set_.add_argument("team")
        set_.add_argument("name")
        choice = set_.add_mutually_exclusive_group(required=True)
        choice.add_argument("max", nargs="?", type=non_negative, help="its max (0 = unlimited)")
        choice.add_argument("--clear", action="store_true", help="make it unlimited")
        listing = actions.add_parser("list", help="list a team's named limits and their use")
        listing.add_argument("team")
        delete = actions.add_parser("delete", help="delete a named limit nothing uses")
        delete.add_argument("team")
        delete.add_argument("name")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, action)(**options)

    def set(self, *, team: str, name: str, max: int | None, clear: bool, **_: Any) -> None:
        given = 0 if clear or max is None else max  # argparse: one of the two is given
        try:
            limit, created = named_limit_set(team=team_get(team), name=name, max=given)
        except ValidationError as exc:
            raise CommandError(validation_messages(exc), returncode=2) from exc
        shown = "unlimited" if limit.max == 0 else str(limit.max)
        self.stdout.write(f"{limit.name} {'created' if created else 'set'}: max {shown}")

    def list(self, *, team: str, **_: Any) -> None:
        usage = named_limit_usage(teams=[team_get(team)])  # an unknown team: no header first
        self.stdout.write("name\tin use\tmax\tqueued")
        for limit in usage:
            shown = "unlimited" if limit.max == 0 else str(limit.max)
            self.stdout.write(f"{limit.name}\t{limit.in_use}\t{shown}\t{limit.queued}")

    def delete(self, *, team: str, name: str, **_: Any) -> None:
        try:
            deleted = named_limit_delete(team=team_get(team), name=name)
        except NamedLimitInUse as exc:
            raise CommandError(str(exc), returncode=1) from exc
        if not deleted:
            raise CommandError(f"no named limit {name!r} in team {team!r}", returncode=2)
        self.stdout.write(f"{name} deleted")
