"""What the `mantle teams` and `mantle limits` commands share: parsing a count, finding a team
(exit 2 when unknown, docs/cli.md) and saying a validation error in one line."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from teams.models import Team


def non_negative(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(value)
    return number


def team_get(slug: str) -> Team:
    try:
        return Team.objects.get(slug=slug)
    except Team.DoesNotExist as exc:
        raise CommandError(f"unknown team {slug!r}", returncode=2) from exc


def validation_messages(error: ValidationError) -> str:
    return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in error.message_dict.items())
