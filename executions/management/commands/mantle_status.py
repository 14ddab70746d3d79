"""`mantle status <id>`: the execution's status word, then its steps. The id may be cut short to
a unique prefix (executions.cli)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from core.terminal import printable
from executions.cli import execution_find, execution_id_prefix
from executions.models import Status
from executions.selectors import execution_queue_positions


class Command(BaseCommand):
    help = "Print an execution's status and its steps."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "execution_id", type=execution_id_prefix, help="its id, or the start of it"
        )

    def handle(self, *args: Any, execution_id: str, **options: Any) -> None:
        execution = execution_find(execution_id)
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
