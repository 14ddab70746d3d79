from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from teams.models import Team


@pytest.fixture
def make_user(db: None) -> Callable[..., User]:
    def make(username: str, *, staff: bool = False, teams: tuple[Team, ...] = ()) -> User:
        user = User.objects.create_user(
            username, password="s3cret-pass", is_staff=staff, is_superuser=staff
        )
        user.teams.set(teams)
        return user

    return make
