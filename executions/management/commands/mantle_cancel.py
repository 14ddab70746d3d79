"""`mantle cancel <id>`: exit 0 when cancelled, 1 when the execution is already terminal."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.terminal import printable
from executions.models import Execution
from executions.services.lifecycle import ExecutionBusy, NotCancellable, execution_cancel


class Command(BaseCommand):
    help = "Cancel a queued, pending or running execution."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("execution_id", type=uuid.UUID)

    def handle(self, *args: Any, execution_id: uuid.UUID, **options: Any) -> None:
        try:
            execution_cancel(execution_id, reason="cancelled from the command line")
        except Execution.DoesNotExist as exc:
            raise CommandError(f"no execution {execution_id}", returncode=2) from exc
        except (NotCancellable, ExecutionBusy) as exc:
            raise CommandError(f"not cancelled: {printable(exc)}", returncode=1) from exc
        self.stdout.write(f"{execution_id} cancelled")
