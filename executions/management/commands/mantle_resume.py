"""`mantle resume workflow <name> --team <t> | team <t> | limit <name> --team <t>`: what the
pause held is promoted at once (docs/cli.md, mantle pause and mantle resume)."""

from __future__ import annotations

from executions.management.commands import mantle_pause


class Command(mantle_pause.Command):
    help = "Resume a paused workflow, team or named limit: its queue is promoted at once."
    paused = False
