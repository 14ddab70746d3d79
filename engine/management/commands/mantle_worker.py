"""`manage.py mantle_worker`: one step-worker process (engine/worker.py), until SIGTERM.
`mantle serve` starts `engine.workers` of them, sharing one claimer role (engine/claimer.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from engine import worker


class Command(BaseCommand):
    help = "Run one step-worker process until Ctrl-C / SIGTERM."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--claimer-lock",
            help="the file whose lock is the claimer role of the workers of one serve",
        )

    def handle(self, *args: Any, claimer_lock: str | None, **options: Any) -> None:
        worker.serve(claimer_lock)
