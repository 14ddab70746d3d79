"""`manage.py mantle_worker`: one step-worker process (engine/worker.py), until SIGTERM.
`mantle serve` starts `engine.workers` of them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from engine import worker


class Command(BaseCommand):
    help = "Run one step-worker process until Ctrl-C / SIGTERM."

    def handle(self, *args: Any, **options: Any) -> None:
        worker.serve()
