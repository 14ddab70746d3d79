"""`mantle validate <file.yaml>…`: every error with its line; exit 1 when any file is invalid.
A valid file may still get warnings (an anonymous webhook), which leave the exit code alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.terminal import printable
from workflows.schema import WorkflowInvalid, parse_workflow
from workflows.schema.triggers import trigger_warnings


def read_workflow_file(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}", returncode=2) from exc


class Command(BaseCommand):
    help = "Validate workflow YAML files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+")

    def handle(self, *args: Any, files: list[str], **options: Any) -> None:
        invalid = 0
        for path in files:
            try:
                spec = parse_workflow(read_workflow_file(path))
            except WorkflowInvalid as exc:
                invalid += 1
                for error in exc.errors:
                    self.stderr.write(f"{path}:{printable(error)}")
                continue
            self.stdout.write(f"{path}: ok ({spec.name}, {len(spec.steps)} steps)")
            for warning in trigger_warnings(spec.triggers):
                self.stderr.write(f"{path}: warning: {warning}")
        if invalid:
            raise CommandError(f"{invalid} of {len(files)} files invalid", returncode=1)
