"""Reads of teams: the names of a team's named limits."""

from __future__ import annotations

from teams.models import NamedLimit, Team


def named_limit_names(*, team: Team) -> frozenset[str]:
    return frozenset(NamedLimit.objects.filter(team=team).values_list("name", flat=True))
