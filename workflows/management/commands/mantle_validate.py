"""`mantle validate [--strict] <file.yaml>…`: every error and warning with its line; exit 1 when
any file is invalid (with --strict, when any has a warning)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from core.terminal import printable
from workflows.schema import SchemaError, WorkflowInvalid, validate_workflow


def read_workflow_file(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}", returncode=2) from exc


def write_warnings(stream: OutputWrapper, path: str, warnings: list[SchemaError]) -> None:
    for warning in warnings:
        stream.write(f"{path}:warning: {printable(warning)}")


class Command(BaseCommand):
    help = "Validate workflow YAML files."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+")
        parser.add_argument("--strict", action="store_true", help="treat every warning as an error")

    def handle(self, *args: Any, files: list[str], strict: bool, **options: Any) -> None:
        invalid = 0
        for path in files:
            try:
                validated = validate_workflow(read_workflow_file(path), strict=strict)
            except WorkflowInvalid as exc:
                invalid += 1
                for error in exc.errors:
                    self.stderr.write(f"{path}:{printable(error)}")
                continue
            write_warnings(self.stderr, path, validated.warnings)
            spec = validated.spec
            self.stdout.write(f"{path}: ok ({spec.name}, {len(spec.steps)} steps)")
        if invalid:
            raise CommandError(f"{invalid} of {len(files)} files invalid", returncode=1)
