"""`manage.py mantle_clock`: the engine clock (engine/clock.py) in a process of its own, until
SIGTERM. `mantle serve` starts one beside its step workers."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from engine import clock


class Command(BaseCommand):
    help = "Run the engine clock until Ctrl-C / SIGTERM."

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        clock.run_forever(stop)
