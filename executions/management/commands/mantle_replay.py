"""`mantle replay <id> [--latest] [--from-failed-step]` (docs/cli.md, mantle replay): exit 0
admitted (pending or queued), 1 refused (the version changed the completed steps, or nothing
failed to resume from), 2 bad usage or unknown execution, 3 rejected by a limit.
`mantle replay --filter k=v … --team <t>`: a bulk action (executions.bulk_cli)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.terminal import printable
from executions.bulk_cli import add_bulk_arguments, bulk_run
from executions.cli import execution_find, execution_id_prefix
from executions.management.commands.mantle_run import EXIT_FAILED, EXIT_REJECTED, EXIT_USAGE
from executions.models import Status
from executions.services.admission import ConcurrencyLimitExceeded
from executions.services.bulk import REPLAY
from executions.services.replay import (
    FAILED_STEP,
    LATEST,
    SAME,
    START,
    NotResumable,
    VersionChanged,
    execution_replay,
)
from workflows.schema import InvalidInputs


class Command(BaseCommand):
    help = "Start a new execution with an execution's inputs and trigger (through the limits)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "execution_id", nargs="?", type=execution_id_prefix, help="its id, or the start of it"
        )
        parser.add_argument(
            "--latest", action="store_true", help="run the workflow's latest version"
        )
        parser.add_argument(
            "--from-failed-step",
            action="store_true",
            help="reuse the completed steps' outputs and run from the first that did not",
        )

        add_bulk_arguments(parser)

    def handle(self, *args: Any, execution_id: str | None, **options: Any) -> None:
        if (execution_id is None) == (not options["filter"]):
            raise CommandError("give an execution id or --filter (one of them)", returncode=2)
        version = LATEST if options["latest"] else SAME
        start = FAILED_STEP if options["from_failed_step"] else START
        if execution_id is None:
            bulk_run(REPLAY, options, self.stdout, version=version, start=start)
            return
        original = execution_find(execution_id)
        try:
            admission = execution_replay(original=original, version=version, start=start)
        except InvalidInputs as exc:
            raise CommandError(printable("; ".join(exc.errors)), returncode=EXIT_USAGE) from exc
        except (NotResumable, VersionChanged) as exc:
            raise CommandError(f"not replayed: {printable(exc)}", returncode=EXIT_FAILED) from exc
        except ConcurrencyLimitExceeded as exc:
            raise CommandError(f"rejected: {printable(exc)}", returncode=EXIT_REJECTED) from exc
        replay = admission.execution
        self.stdout.write(f"{replay.id} {admission.status}")
        reused = f", {replay.reused_steps} completed steps reused" if replay.reused_steps else ""
        self.stdout.write(f"replay of {original.id} (version {replay.version.number}{reused})")
        if admission.status == Status.QUEUED:
            self.stdout.write(
                f"queue position {admission.queue_position}, blocked by {admission.blocked_by}"
            )
