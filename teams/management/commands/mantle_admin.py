"""`mantle admin reset-password [<username>]`: a new password, printed and, for make run's admin,
saved in .mantle/credentials (teams.credentials)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from teams.credentials import DEMO_ADMIN, PASSWORD, credentials_path, credentials_read, password_set


class Command(BaseCommand):
    help = "Reset a user's password (make run's admin by default)."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        reset = actions.add_parser("reset-password", help="print a new password for a user")
        reset.add_argument("username", nargs="?", default=DEMO_ADMIN)

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist as exc:
            raise CommandError(f"no user {username!r}", returncode=2) from exc
        password = password_set(user)
        self.stdout.write(f"new password for {username}: {password}")
        if credentials_read().get(PASSWORD) == password:
            self.stdout.write(f"saved in {credentials_path()}")
