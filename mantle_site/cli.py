"""The `mantle` console script: `mantle <command> …` runs `manage.py mantle_<command> …`."""

from __future__ import annotations

import os
import sys

COMMANDS = {
    "run": "mantle_run",
    "apply": "mantle_apply",
    "validate": "mantle_validate",
    "teams": "mantle_teams",
    "limits": "mantle_limits",
    "keys": "mantle_keys",
    "status": "mantle_status",
    "cancel": "mantle_cancel",
    "pause": "mantle_pause",
    "resume": "mantle_resume",
    "prune": "mantle_prune",
    "serve": "mantle_serve",
    "seed-demo": "mantle_seed_demo",
    "migrate": "migrate",
}

USAGE = "usage: mantle {" + ",".join(COMMANDS) + "} …  (mantle <command> --help for more)"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help"}:
        print(USAGE)
        raise SystemExit(0 if args else 2)
    command = COMMANDS.get(args[0])
    if command is None:
        print(f"mantle: unknown command {args[0]!r}\n{USAGE}", file=sys.stderr)
        raise SystemExit(2)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mantle_site.settings")
    _share_metrics_with_local_server()
    from django.core.management import execute_from_command_line

    from mantle_site.config import ConfigError

    try:
        execute_from_command_line([f"mantle {args[0]}", command, *args[1:]])
    except ConfigError as error:  # raised while settings load: a message, not a traceback
        print(f"mantle: configuration error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _share_metrics_with_local_server() -> None:
    """A rejection by `mantle run` is counted where this machine's `mantle serve` scrapes it."""
    from mantle_site import embedded_db

    directory = embedded_db.home() / "metrics"
    if directory.is_dir():
        os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(directory))
