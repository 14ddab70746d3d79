"""`mantle prune [--dry-run]`: the retention pass by hand (docs/cli.md, mantle prune): the rows
it deleted per table, or with --dry-run those it would delete now."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from executions.services.retention import prune

TABLES = ("executions", "steps", "rejections", "bulk_actions", "queue_samples")


class Command(BaseCommand):
    help = "Delete finished executions, their steps and rejections past their retention."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args: Any, dry_run: bool, **options: Any) -> None:
        pruned = prune(dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(f"{verb}: " + ", ".join(f"{pruned[t]} {t}" for t in TABLES))
