"""Writes to teams: create, change the concurrency limit, set named limits, issue and revoke API
keys. (Deleting a named limit checks what uses it: executions.services.named_limits.)"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core import locks
from teams.models import ApiKey, NamedLimit, NamedRate, Team
from teams.signals import limit_loosened, loosens


def team_create(*, slug: str, name: str = "", max_concurrent_executions: int | None = None) -> Team:
    team = Team(slug=slug, name=name or slug, max_concurrent_executions=max_concurrent_executions)
    team.full_clean()
    team.save()
    return team


def team_set_limit(*, team: Team, max_concurrent_executions: int | None) -> Team:
    """Set (or with None, clear) the team's override. A looser limit promotes what now fits."""
    if max_concurrent_executions is not None and max_concurrent_executions < 0:
        raise ValueError("max_concurrent_executions must be >= 0")
    with transaction.atomic():
        before = Team.objects.select_for_update().get(id=team.id).effective_limit
        team.max_concurrent_executions = max_concurrent_executions
        team.save(update_fields=["max_concurrent_executions"])
        if loosens(before, team.effective_limit):
            limit_loosened.send(sender=Team, team_id=team.id)
    return team


def named_limit_set(*, team: Team | None, name: str, max: int) -> tuple[NamedLimit, bool]:
    """Create or change the team's named limit, or with no team a global one (0: unlimited);
    returns it and whether it was created. Under the team's lock, which admission holds while it
    reads the team's named limits. A looser limit promotes what now fits (and its raise is
    announced to the step workers by a trigger: waiting steps may fit). Raises ValidationError
    on a bad name or max."""
    with transaction.atomic():
        if team is not None:
            locks.lock_team(team.id)
        limit = NamedLimit.objects.filter(team=team, name=name).first()
        created = limit is None
        before = 0 if limit is None else limit.max
        limit = limit or NamedLimit(team=team, name=name)
        limit.max = max
        limit.full_clean()
        limit.save()
        if team is not None and not created and loosens(before, max):
            limit_loosened.send(sender=NamedLimit, team_id=team.id)
    return limit, created


def named_rate_set(
    *, team: Team | None, name: str, max: int, period: timedelta, per_key: bool = False
) -> tuple[NamedRate, bool]:
    """Create or change the team's named rate, or with no team a global one; returns it and
    whether it was created. Raises ValidationError on a bad name, max or period."""
    if period <= timedelta(0):
        raise ValidationError({"period": ["must be a duration greater than zero"]})
    with transaction.atomic():
        rate = NamedRate.objects.filter(team=team, name=name).first()
        created = rate is None
        rate = rate or NamedRate(team=team, name=name)
        rate.max, rate.period, rate.per_key = max, period, per_key
        rate.full_clean()
        rate.save()
    return rate, created


def api_key_create(*, team: Team, name: str = "", user: User | None = None) -> tuple[ApiKey, str]:
    """Returns the stored key and the key itself, which is shown once and never stored. `user`:
    the user it acts for (a staff user's key may change global named limits)."""
    key = "mk_" + secrets.token_hex(32)
    api_key = ApiKey.objects.create(
        team=team, user=user, name=name, prefix=key[:10], key_hash=ApiKey.hash(key)
    )
    return api_key, key


def api_key_revoke(*, api_key: ApiKey) -> None:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
