"""`make run`'s credentials (docs/cli.md, Credentials): the demo team's API key and the admin's
password, kept in MANTLE_HOME/credentials, readable by its owner only, as shell assignments (so
`. .mantle/credentials` sets $MANTLE_KEY). `mantle seed-demo` keeps what there still works and
replaces only what does not; nothing valid is revoked or reset behind the user's back."""

from __future__ import annotations

import os
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from teams.models import ApiKey, Team
from teams.services import api_key_create

KEY = "MANTLE_KEY"
USER = "MANTLE_ADMIN_USER"
PASSWORD = "MANTLE_ADMIN_PASSWORD"
URL = "MANTLE_URL"
DEMO_KEY_NAME = "make run"
DEMO_ADMIN = "admin"
HEADER = (
    "# Mantle's demo credentials, written by `mantle seed-demo` (make run). Readable by you only.\n"
    "# `. .mantle/credentials` sets $MANTLE_KEY; `mantle admin reset-password`: a new password.\n"
)


def credentials_path() -> Path:
    return Path(settings.MANTLE_HOME) / "credentials"


def credentials_read() -> dict[str, str]:
    try:
        text = credentials_path().read_text()
    except FileNotFoundError:
        return {}
    values = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            values[name] = value
    return values


def credentials_write(values: dict[str, str]) -> None:
    """The file, replaced whole (never half written), mode 0600."""
    path = credentials_path()
    text = HEADER + "".join(f"export {name}={shlex.quote(v)}\n" for name, v in values.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".credentials-{os.getpid()}")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    os.replace(staging, path)


def new_password() -> str:
    return secrets.token_urlsafe(12)


def password_set(user: AbstractBaseUser) -> str:
    """A new password for `user`; written to the file when it is the file's admin."""
    password = new_password()
    user.set_password(password)
    user.save(update_fields=["password"])
    if credentials_read().get(USER, DEMO_ADMIN) == user.get_username():
        credentials_write({**credentials_read(), USER: user.get_username(), PASSWORD: password})
    return password


@dataclass
class DemoCredentials:
    key: str  # the key itself (in the file)
    key_created: bool
    username: str
    password: str | None  # None: the admin's password is not the file's (changed since)
    admin_created: bool


def demo_credentials_ensure(*, team: Team, username: str = DEMO_ADMIN) -> DemoCredentials:
    """The file's key if it still works for `team`, else a new one; the admin user, created with
    a new password if missing. An existing admin's password is never changed here."""
    saved = credentials_read()
    key = saved.get(KEY, "")
    working = ApiKey.objects.filter(team=team, key_hash=ApiKey.hash(key), revoked_at=None)
    key_created = not key or not working.exists()
    if key_created:
        _, key = api_key_create(team=team, name=DEMO_KEY_NAME)
    user, admin_created = get_user_model().objects.get_or_create(
        username=username, defaults={"is_staff": True, "is_superuser": True}
    )
    team.members.add(user)
    password: str | None = saved.get(PASSWORD)
    if admin_created:
        password = new_password()
        user.set_password(password)
        user.save(update_fields=["password"])
    elif password is None or saved.get(USER) != username or not user.check_password(password):
        password = None  # changed since (the admin, reset-password): not ours to reset
    values = {**saved, URL: f"http://{settings.MANTLE.server.bind}/", KEY: key, USER: username}
    values.pop(PASSWORD, None)
    credentials_write(values | ({PASSWORD: password} if password else {}))
    return DemoCredentials(key, key_created, username, password, admin_created)
