"""`mantle status <id>`: the execution's status word, then its steps."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.terminal import printable
from executions.models import Execution, Status
from executions.selectors import execution_queue_positions


class Command(BaseCommand):
    help = "Print an execution's status and its steps."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("execution_id", type=uuid.UUID)

    def handle(self, *args: Any, execution_id: uuid.UUID, **options: Any) -> None:
        try:
            execution = Execution.objects.select_related("workflow").get(id=execution_id)
        except Execution.DoesNotExist as exc:
            raise CommandError(f"no execution {execution_id}", returncode=2) from exc
        self.stdout.write(execution.status)
        if execution.status == Status.QUEUED:
            position = execution_queue_positions(executions=[execution]).get(execution.id)
            self.stdout.write(f"queue position {position}, blocked by {execution.blocked_by}")
        if execution.error:
            self.stdout.write(f"error: {printable(execution.error)}")
        # A fan-out has up to limits.fanout_items branches: streamed, without their outputs.
        steps = execution.steps.order_by("created_at", "name", "fanout_index")
        fields = ("name", "fanout_index", "status", "attempt", "error")
        for step in steps.only(*fields).iterator(chunk_size=1000):
            branch = "" if step.fanout_index is None else f"[{step.fanout_index}]"
            line = f"  {step.name}{branch}  {step.status}  attempt {step.attempt}"
            self.stdout.write(line + (f"  {printable(step.error)}" if step.error else ""))
