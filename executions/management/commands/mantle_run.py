"""`mantle run <workflow> --team <slug>`: admit an execution like any other caller.

Exit codes (docs/cli.md): 0 admitted (pending or queued), 3 rejected by a limit, 2 bad usage or
unknown workflow; with --wait, 0 only when it completes and 1 when it fails, is cancelled or times
out.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.terminal import printable
from executions.models import TERMINAL, BlockedBy, Execution, Status
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.scheduled import execution_schedule, run_time
from teams.models import Team
from workflows.models import WorkflowDefinition
from workflows.schema import InvalidInputs, WorkflowSpec

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3


class Command(BaseCommand):
    help = "Run a workflow, respecting its concurrency limits unless --force is given."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workflow")
        parser.add_argument("--team", required=True, help="the team's slug")
        parser.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="an input value (repeatable); typed by the workflow's input declaration",
        )
        parser.add_argument("--force", action="store_true", help="bypass every limit (operator)")
        parser.add_argument("--wait", action="store_true", help="wait until it finishes")
        later = parser.add_mutually_exclusive_group()
        later.add_argument("--at", metavar="TIME", help="a delayed run: at this RFC 3339 time")
        later.add_argument("--in", dest="delay", metavar="DURATION", help="a delayed run: 10m")

    def handle(self, *args: Any, **options: Any) -> None:
        workflow = self.find_workflow(options["workflow"], options["team"])
        spec = WorkflowSpec.from_dict(workflow.applied_version.spec)
        inputs = parse_inputs(spec, options["input"])
        if options["at"] is not None or options["delay"] is not None:
            self.schedule(workflow, inputs, run_at=options["at"], delay=options["delay"])
            return
        try:
            admission = execution_admit(
                team=workflow.team,
                workflow=workflow,
                inputs=inputs,
                trigger={"type": "cli"},
                force=options["force"],
            )
        except InvalidInputs as exc:
            raise CommandError(printable("; ".join(exc.errors)), returncode=EXIT_USAGE) from exc
        except ConcurrencyLimitExceeded as exc:
            raise CommandError(f"rejected: {printable(exc)}", returncode=EXIT_REJECTED) from exc
        for warning in admission.warnings:
            self.stderr.write(f"warning: {printable(warning)}")
        self.stdout.write(f"{admission.execution.id} {admission.status}")
        if admission.execution.concurrency_key:
            self.stdout.write(f"concurrency key {printable(admission.execution.concurrency_key)}")
        if admission.status == Status.QUEUED:
            blocked_by = admission.blocked_by
            if blocked_by == BlockedBy.LIMIT:
                blocked_by = f"limit {admission.blocked_by_name}"
            self.stdout.write(f"queue position {admission.queue_position}, blocked by {blocked_by}")
        if options["wait"]:
            self.wait(admission.execution)

    def schedule(
        self,
        workflow: WorkflowDefinition,
        inputs: dict[str, object],
        *,
        run_at: str | None,
        delay: str | None,
    ) -> None:
        """A delayed run: prints its id, `scheduled` and its time."""
        try:
            scheduled = execution_schedule(
                team=workflow.team,
                workflow=workflow,
                run_at=run_time(run_at=run_at, delay=delay),
                inputs=inputs,
                trigger={"type": "cli"},
            )
        except InvalidInputs as exc:
            raise CommandError("; ".join(exc.errors), returncode=EXIT_USAGE) from exc
        except ValueError as exc:
            raise CommandError(f"--at/--in: {exc}", returncode=EXIT_USAGE) from exc
        assert scheduled.run_at is not None
        self.stdout.write(f"{scheduled.id} scheduled for {scheduled.run_at.isoformat()}")

    def find_workflow(self, name: str, team_slug: str) -> WorkflowDefinition:
        try:
            team = Team.objects.get(slug=team_slug)
            return WorkflowDefinition.objects.select_related("team", "current_version").get(
                team=team, name=name
            )
        except Team.DoesNotExist as exc:
            raise CommandError(f"unknown team {team_slug!r}", returncode=EXIT_USAGE) from exc
        except WorkflowDefinition.DoesNotExist as exc:
            raise CommandError(
                f"unknown workflow {name!r} for team {team_slug!r}", returncode=EXIT_USAGE
            ) from exc

    def wait(self, execution: Execution) -> None:
        status = execution.status
        while status not in TERMINAL:
            time.sleep(0.2)
            status = Execution.objects.values_list("status", flat=True).get(id=execution.id)
        self.stdout.write(status)
        if status != Status.COMPLETED:
            raise CommandError(f"execution {execution.id} {status}", returncode=EXIT_FAILED)


def parse_inputs(spec: WorkflowSpec, pairs: list[str]) -> dict[str, object]:
    """`key=value` pairs, typed by the workflow's declared input types."""
    types = {i.name: i.type for i in spec.inputs}
    inputs: dict[str, object] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"--input takes KEY=VALUE, got {pair!r}", returncode=EXIT_USAGE)
        inputs[key] = _typed(key, raw, types.get(key, "string"))
    return inputs


def _typed(key: str, raw: str, kind: str | None) -> object:
    if kind == "boolean" and raw.lower() in {"true", "false"}:
        return raw.lower() == "true"
    if kind == "number":
        try:
            return int(raw)
        except ValueError:
            try:
                return float(raw)
            except ValueError:
                pass
    if kind in ("string", None):  # an untyped input takes the text as given
        return raw
    raise CommandError(f"input {key}: {raw!r} is not a {kind}", returncode=EXIT_USAGE)
