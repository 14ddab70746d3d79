"""`mantle cancel <id>`: exit 0 when cancelled, 1 when the execution is already terminal. The id
may be cut short to a unique prefix (executions.cli). `mantle cancel --filter k=v … --team <t>`:
a bulk action (executions.bulk_cli)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.terminal import printable
from executions.bulk_cli import add_bulk_arguments, bulk_run
from executions.cli import execution_find, execution_id_prefix
from executions.models import Execution
from executions.services.bulk import CANCEL
from executions.services.lifecycle import ExecutionBusy, NotCancellable, execution_cancel


class Command(BaseCommand):
    help = "Cancel a queued, pending or running execution."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "execution_id", nargs="?", type=execution_id_prefix, help="its id, or the start of it"
        )
        add_bulk_arguments(parser)

    def handle(self, *args: Any, execution_id: str | None, **options: Any) -> None:
        if (execution_id is None) == (not options["filter"]):
            raise CommandError("give an execution id or --filter (one of them)", returncode=2)
        if execution_id is None:
            bulk_run(CANCEL, options, self.stdout)
            return
        found = execution_find(execution_id).id
        try:
            execution_cancel(found, reason="cancelled from the command line")
        except Execution.DoesNotExist as exc:
            raise CommandError(f"no execution {found}", returncode=2) from exc
        except (NotCancellable, ExecutionBusy) as exc:
            raise CommandError(f"not cancelled: {printable(exc)}", returncode=1) from exc
        self.stdout.write(f"{found} cancelled")
