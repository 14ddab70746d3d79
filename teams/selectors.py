"""Reads of teams: their named limits, by name."""

from __future__ import annotations

from django.db.models import Q

from teams.models import NamedLimit, NamedRate, Team


def named_limit_names(*, team: Team) -> frozenset[str]:
    return frozenset(NamedLimit.objects.filter(team=team).values_list("name", flat=True))


def _step_scope(team_id: int) -> list[tuple[int, str, int]]:
    """(id, name, max) of the limits a team's steps may list: its own, then the global ones, so
    that a team's limit shadows a global one of the same name (docs/limits.md, Step scope)."""
    return list(
        NamedLimit.objects.filter(Q(team_id=team_id) | Q(team__isnull=True))
        .order_by("team_id")  # NULLs last: the team's own first
        .values_list("id", "name", "max")
    )


def step_limit_maxes(*, team: Team) -> dict[str, int]:
    """The limits the team's steps may list, by name, with their max (0: unlimited)."""
    maxes: dict[str, int] = {}
    for _, name, most in _step_scope(team.id):
        maxes.setdefault(name, most)
    return maxes


def step_limit_ids(*, team_id: int) -> dict[str, int]:
    """The ids of the named limits the team's steps may list, by name."""
    ids: dict[str, int] = {}
    for limit_id, name, _ in _step_scope(team_id):
        ids.setdefault(name, limit_id)
    return ids


def step_rates(*, team_id: int) -> dict[str, tuple[int, int, bool]]:
    """The rates the team's steps may name, by name: (id, max, per_key), its own shadowing a
    global one of the same name."""
    rates: dict[str, tuple[int, int, bool]] = {}
    for rate_id, name, most, per_key in (
        NamedRate.objects.filter(Q(team_id=team_id) | Q(team__isnull=True))
        .order_by("team_id")
        .values_list("id", "name", "max", "per_key")
    ):
        rates.setdefault(name, (rate_id, most, per_key))
    return rates
