"""What the `mantle teams` and `mantle limits` commands share: parsing a count, finding a team
(exit 2 when unknown, docs/cli.md) and saying a validation error in one line."""

from __future__ import annotations

from argparse import ArgumentTypeError

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from core.bounds import count_argument
from teams.models import Team


def non_negative(value: str) -> int:
    """A limit from the command line, 0 to MAX_COUNT (docs/hostile-input.md, Bounds): argparse
    turns the error into exit 2 naming the bound."""
    try:
        return count_argument(value)
    except ValueError as exc:
        raise ArgumentTypeError(str(exc)) from None


def team_get(slug: str) -> Team:
    try:
        return Team.objects.get(slug=slug)
    except Team.DoesNotExist as exc:
        raise CommandError(f"unknown team {slug!r}", returncode=2) from exc


def validation_messages(error: ValidationError) -> str:
    return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in error.message_dict.items())
