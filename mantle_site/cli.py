"""The `mantle` console script: `mantle <command> …` runs the management command
`mantle_<command>` (docs/cli.md), with usage lines that read `mantle <command> …` and without
Django's generic options in its help (they still work)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from django.core.management.base import CommandParser

# The command, the management command it runs, and its line in `mantle --help`.
COMMANDS = {
    "run": ("mantle_run", "start an execution of a workflow (exit 3 when a limit rejects it)"),
    "status": ("mantle_status", "print an execution's status and its steps"),
    "cancel": ("mantle_cancel", "cancel a queued, pending or running execution"),
    "replay": ("mantle_replay", "run an execution again (its inputs; --from-failed-step)"),
    "apply": ("mantle_apply", "create or update a team's workflows from YAML files"),
    "validate": ("mantle_validate", "check workflow YAML files (no database needed)"),
    "teams": ("mantle_teams", "create and list teams, set or clear their concurrency limit"),
    "limits": ("mantle_limits", "set, list and delete a team's named limits"),
    "rates": ("mantle_rates", "set, list and delete named rates of steps (a team's or global)"),
    "keys": ("mantle_keys", "create API keys"),
    "admin": ("mantle_admin", "reset the admin user's password (kept in .mantle/credentials)"),
    "pause": ("mantle_pause", "pause a workflow, a team or a named limit (new executions queue)"),
    "resume": ("mantle_resume", "resume what a pause held, promoting at once"),
    "prune": ("mantle_prune", "delete finished executions past their retention (--dry-run)"),
    "serve": ("mantle_serve", "run the web app, the API and the workers until Ctrl-C"),
    "migrate": ("migrate", "create or upgrade the database's tables"),
    "seed-demo": ("mantle_seed_demo", "seed the demo team, the examples, an API key and an admin"),
}
# Django's own options: accepted, left out of every command's help.
GENERIC_OPTIONS = {
    "--version",
    "--verbosity",
    "--settings",
    "--pythonpath",
    "--traceback",
    "--no-color",
    "--force-color",
    "--skip-checks",
}
WIDTH = max(map(len, COMMANDS))
HELP = "\n".join(
    [
        "usage: mantle <command> [arguments]   (mantle <command> --help: its own)",
        "",
        "commands:",
        *(f"  {name.ljust(WIDTH)}  {summary}" for name, (_, summary) in COMMANDS.items()),
    ]
)
INTERRUPTED = 130  # a shell's code for a command stopped by Ctrl-C (128 + SIGINT)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["help"] and len(args) == 2:
        args = [args[1], "--help"]
    if not args or args[0] in {"-h", "--help", "help"}:
        print(HELP)
        raise SystemExit(0 if args else 2)
    if args[0] not in COMMANDS:
        print(f"mantle: unknown command {args[0]!r}\n{HELP}", file=sys.stderr)
        raise SystemExit(2)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mantle_site.settings")
    _share_metrics_with_local_server()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    from core.terminal import TerminalSafe

    # No escape sequence from stored data reaches the terminal (docs/hostile-input.md).
    sys.stdout, sys.stderr = TerminalSafe(sys.stdout), TerminalSafe(sys.stderr)
    from mantle_site.config import ConfigError
    from mantle_site.embedded_db import EmbeddedDatabaseError

    try:
        _run(args[0], args[1:])
    except ConfigError as error:  # raised while settings load: a message, not a traceback
        _fail(f"configuration error: {error}", 2)
    except EmbeddedDatabaseError as error:
        _fail(str(error), 1)
    except KeyboardInterrupt:
        _fail("interrupted", INTERRUPTED)


def _run(name: str, args: list[str]) -> None:
    import django
    from django.core.management import get_commands, load_command_class

    django.setup()
    command_name = COMMANDS[name][0]
    command = load_command_class(get_commands()[command_name], command_name)
    hidden = GENERIC_OPTIONS - ({"--verbosity"} if command_name == "migrate" else set())
    create_parser = command.create_parser

    def parser_without_generic_options(*args: Any, **kwargs: Any) -> CommandParser:
        parser = create_parser(*args, **kwargs)
        for action in parser._actions:
            if hidden & set(action.option_strings):
                action.help = argparse.SUPPRESS  # out of the usage line and the help
        return parser

    command.create_parser = parser_without_generic_options  # type: ignore[method-assign]
    # argv[0] and argv[1] make the usage line's `mantle <name>`.
    command.run_from_argv(["mantle", name, *args])


def _fail(message: str, code: int) -> NoReturn:
    print(f"mantle: {message}", file=sys.stderr)
    raise SystemExit(code)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM ends a command as Ctrl-C does: its transaction rolled back, the embedded
    PostgreSQL stopped if nothing else uses it (atexit runs)."""
    raise SystemExit(128 + signum)


def _share_metrics_with_local_server() -> None:
    """A rejection by `mantle run` is counted where this machine's `mantle serve` scrapes it."""
    from mantle_site import embedded_db

    directory = embedded_db.home() / "metrics"
    if directory.is_dir():
        os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(directory))
