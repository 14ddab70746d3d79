"""Writes to teams: create, change the concurrency limit, issue and revoke API keys."""

from __future__ import annotations

import secrets

from django.db import transaction
from django.utils import timezone

from teams.models import ApiKey, Team
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


def api_key_create(*, team: Team, name: str = "") -> tuple[ApiKey, str]:
    """Returns the stored key and the key itself, which is shown once and never stored."""
    key = "mk_" + secrets.token_hex(32)
    api_key = ApiKey.objects.create(
        team=team, name=name, prefix=key[:10], key_hash=ApiKey.hash(key)
    )
    return api_key, key


def api_key_revoke(*, api_key: ApiKey) -> None:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
