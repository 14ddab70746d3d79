"""`mantle limits set|list|delete`: a team's named limits, shared by the workflows and steps that
list them, or with `set --global` a limit shared by the steps of every team (docs/limits.md).
Exit 2 on bad usage (an unknown team, a bad name or max), 1 when a delete is refused because the
limit is in use."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.bounds import count_argument
from executions.selectors import named_limit_usage
from executions.services.named_limits import NamedLimitInUse, named_limit_delete
from teams.cli import team_get, validation_messages
from teams.services import named_limit_set


def _max(word: str) -> int:
    try:
        return count_argument(word)
    except ValueError as exc:
        raise CommandError(f"max {exc}", returncode=2) from exc


class Command(BaseCommand):
    help = "Set, list and delete a team's named limits."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        set_ = actions.add_parser(
            "set",
            help="create or change a named limit: set [--global] [<team>] <name> (<max> | --clear)",
        )
        set_.add_argument(
            "--global",
            dest="is_global",
            action="store_true",
            help="a global limit, shared by the steps of every team (no team given)",
        )
        set_.add_argument("words", nargs="+", metavar="[team] name [max]")
        set_.add_argument("--clear", action="store_true", help="make it unlimited")
        listing = actions.add_parser("list", help="list a team's named limits and their use")
        listing.add_argument("team")
        delete = actions.add_parser("delete", help="delete a named limit nothing uses")
        delete.add_argument("team")
        delete.add_argument("name")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, action)(**options)

    def set(self, *, is_global: bool, words: list[str], clear: bool, **_: Any) -> None:
        expected = (1 if is_global else 2) + (0 if clear else 1)
        if len(words) != expected:
            usage = "set --global <name>" if is_global else "set <team> <name>"
            raise CommandError(f"usage: mantle limits {usage} (<max> | --clear)", returncode=2)
        given = 0 if clear else _max(words.pop())
        team = None if is_global else team_get(words.pop(0))
        try:
            limit, created = named_limit_set(team=team, name=words[0], max=given)
        except ValidationError as exc:
            raise CommandError(validation_messages(exc), returncode=2) from exc
        shown = "unlimited" if limit.max == 0 else str(limit.max)
        scope = " (global)" if is_global else ""
        self.stdout.write(f"{limit.name}{scope} {'created' if created else 'set'}: max {shown}")

    def list(self, *, team: str, **_: Any) -> None:
        usage = named_limit_usage(teams=[team_get(team)])  # an unknown team: no header first
        self.stdout.write("name\tscope\tin use\tmax\tqueued\tunits in use\twaiting steps")
        for limit in usage:
            shown = "unlimited" if limit.max == 0 else str(limit.max)
            self.stdout.write(
                f"{limit.name}\t{limit.scope}\t{limit.in_use}\t{shown}\t{limit.queued}"
                f"\t{limit.units_in_use}\t{limit.waiting_steps}"
            )

    def delete(self, *, team: str, name: str, **_: Any) -> None:
        try:
            deleted = named_limit_delete(team=team_get(team), name=name)
        except NamedLimitInUse as exc:
            raise CommandError(str(exc), returncode=1) from exc
        if not deleted:
            raise CommandError(f"no named limit {name!r} in team {team!r}", returncode=2)
        self.stdout.write(f"{name} deleted")
