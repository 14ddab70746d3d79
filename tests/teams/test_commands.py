from __future__ import annotations

import pytest

from teams.models import ApiKey, Team
from tests.commands import exit_code, run


@pytest.mark.django_db
def test_teams_create_set_limit_clear_and_list(mantle_config):
    mantle_config("engine", max_concurrent_executions_per_team=50)
    assert run("mantle_teams", "create", "blue", "--max-concurrent", "5").strip() == (
        "blue created, limit 5"
    )
    run("mantle_teams", "set-limit", "blue", "9")
    assert Team.objects.get(slug="blue").max_concurrent_executions == 9
    run("mantle_teams", "set-limit", "blue", "--clear")
    assert Team.objects.get(slug="blue").max_concurrent_executions is None
    assert run("mantle_teams", "list").strip() == "blue\t50 (config default)"
    assert exit_code("mantle_teams", "set-limit", "nobody", "3") == 2


@pytest.mark.django_db
def test_keys_create_prints_the_key_once_and_stores_its_hash(team):
    key = run("mantle_keys", "create", "--team", "acme").strip()
    assert key.startswith("mk_") and len(key) == 67
    stored = ApiKey.objects.get()
    assert stored.key_hash == ApiKey.hash(key)
    assert key not in (stored.prefix, stored.key_hash)
