"""What `mantle cancel --filter …` and `mantle replay --filter …` share (docs/cli.md, Bulk
actions): the filter's `key=value` pairs, the dry run's count, the action made and, with
--wait, its progress until the engine clock has handled it. Exit 2 for bad usage."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser, OutputWrapper

from executions.models import BulkStatus, Status
from executions.services.bulk import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    BulkFilter,
    NotCancellableStatus,
    bulk_count,
    bulk_create,
)
from teams.models import Team
from workflows.models import WorkflowDefinition

KEYS = ("workflow", "status", "key", "created_after", "created_before")


def add_bulk_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a bulk action on every execution matching ({', '.join(KEYS)}; repeatable)",
    )
    parser.add_argument("--team", help="the team's slug (with --filter)")
    parser.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, help=f"at most this many (≤ {MAX_LIMIT})"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the count only")
    parser.add_argument("--wait", action="store_true", help="print progress until done")


def bulk_run(action: str, options: dict[str, Any], out: OutputWrapper, **replay: str) -> None:
    if options["team"] is None:
        raise CommandError("--filter needs --team", returncode=2)
    team = Team.objects.filter(slug=options["team"]).first()
    if team is None:
        raise CommandError(f"no team {options['team']!r}", returncode=2)
    if not 1 <= options["limit"] <= MAX_LIMIT:
        raise CommandError(f"--limit: from 1 to {MAX_LIMIT}", returncode=2)
    where = _filter(team, options["filter"])
    try:
        if options["dry_run"]:
            count = bulk_count(team=team, action=action, where=where, limit=options["limit"])
            out.write(f"{count} matched (dry run)")
            return
        bulk = bulk_create(team=team, action=action, where=where, limit=options["limit"], **replay)
    except NotCancellableStatus as exc:
        raise CommandError(str(exc), returncode=2) from exc
    out.write(f"bulk {bulk.id}: {bulk.matched} matched")
    while options["wait"] and bulk.status == BulkStatus.RUNNING:
        time.sleep(0.5)
        bulk.refresh_from_db()
        out.write(f"{bulk.done}/{bulk.matched} done, {bulk.failed} failed")
    if options["wait"]:
        out.write(f"{bulk.status}: {bulk.done - bulk.failed} {action}ed, {bulk.failed} failed")
        for error in bulk.errors:
            out.write(f"  {error}")


def _filter(team: Team, pairs: list[str]) -> BulkFilter:
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in KEYS:
            raise CommandError(f"--filter takes one of {KEYS}=VALUE, got {pair!r}", returncode=2)
        if key == "workflow":
            workflow = WorkflowDefinition.objects.filter(team=team, name=value).first()
            if workflow is None:
                raise CommandError(f"no workflow {value!r} in team {team.slug!r}", returncode=2)
            fields["workflow"] = workflow
        elif key == "status":
            if value not in Status.values:
                raise CommandError(f"status: one of {Status.values}", returncode=2)
            fields["status"] = value
        elif key == "key":
            fields["concurrency_key"] = value
        else:
            try:
                when = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                when = None
            if when is None or when.tzinfo is None:
                raise CommandError(f"{key}: an RFC 3339 time with its offset", returncode=2)
            fields[key] = when
    return BulkFilter(**fields)
