"""`mantle rates set [--global] [<team>] <name> <max>/<period> [--per-key]`: a named rate that
steps share (docs/limits.md, Step scope), a team's or with `--global` one shared by the steps of
every team. Exit 2 on bad usage (an unknown team, a bad name, max or period)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.bounds import count_argument, duration_argument
from teams.cli import team_get, validation_messages
from teams.services import named_rate_set


def _rate(word: str) -> tuple[int, float]:
    """`<max>/<period>`, e.g. 100/1m."""
    most, _, period = word.partition("/")
    try:
        return count_argument(most, minimum=1), duration_argument(period)
    except ValueError as exc:
        raise CommandError(
            f"expected <max>/<period> (e.g. 100/1m), got {word!r}: {exc}", returncode=2
        ) from exc


class Command(BaseCommand):
    help = "Set a named rate shared by the steps that name it."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        set_ = actions.add_parser(
            "set",
            help="create or change a named rate: set [--global] [<team>] <name> <max>/<period>",
        )
        set_.add_argument(
            "--global", dest="is_global", action="store_true", help="a global rate (no team)"
        )
        set_.add_argument("--per-key", action="store_true", help="a window per key value")
        set_.add_argument("words", nargs="+", metavar="[team] name max/period")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        getattr(self, action)(**options)

    def set(self, *, is_global: bool, per_key: bool, words: list[str], **_: Any) -> None:
        if len(words) != (2 if is_global else 3):
            usage = "set --global <name>" if is_global else "set <team> <name>"
            raise CommandError(f"usage: mantle rates {usage} <max>/<period>", returncode=2)
        most, period = _rate(words.pop())
        team = None if is_global else team_get(words.pop(0))
        try:
            rate, created = named_rate_set(
                team=team,
                name=words[0],
                max=most,
                period=timedelta(seconds=period),
                per_key=per_key,
            )
        except ValidationError as exc:
            raise CommandError(validation_messages(exc), returncode=2) from exc
        scope = " (global)" if is_global else ""
        keyed = " per key" if rate.per_key else ""
        self.stdout.write(
            f"{rate.name}{scope} {'created' if created else 'set'}: "
            f"max {rate.max} per {rate.period.total_seconds():g}s{keyed}"
        )
