"""What `mantle status` and `mantle cancel` share: an execution named by its id or by a unique
prefix of it, such as the 8 hex digits the dashboard and the admin show (docs/cli.md, Execution
ids). Exit 2 when none or several match."""

from __future__ import annotations

import argparse
import re
import uuid

from django.core.management.base import CommandError

from executions.models import Execution

HEX_DIGITS = re.compile(r"[0-9a-f]{1,32}")


def execution_id_prefix(value: str) -> str:
    """argparse's type: the hex digits of an id or of its start (dashes ignored)."""
    digits = value.strip().lower().replace("-", "")
    if not HEX_DIGITS.fullmatch(digits):
        raise argparse.ArgumentTypeError(f"{value!r} is not an execution id or its start")
    return digits


def execution_find(prefix: str) -> Execution:
    """The one execution whose id starts with `prefix`: a range of the primary key's index."""
    first, last = uuid.UUID(prefix.ljust(32, "0")), uuid.UUID(prefix.ljust(32, "f"))
    found = list(Execution.objects.filter(id__gte=first, id__lte=last).order_by("id")[:2])
    if not found:
        raise CommandError(f"no execution {prefix}", returncode=2)
    if len(found) > 1:
        raise CommandError(
            f"{prefix} is ambiguous: {found[0].id}, {found[1].id} and maybe more start with it; "
            f"give more of the id",
            returncode=2,
        )
    return found[0]
