"""queue_timeout (docs/limits.md): a queued execution not promoted in time ends `timed_out`, with
`error: "queued longer than <timeout>"`. The backup poller runs it before it promotes, so it
happens within one poll of the deadline. A queued execution holds no slot: no count changes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db import connection

from executions.models import Status
from executions.services.lifecycle import execution_finish
from executions.sql import queries
from executions.sql.rows import rows_as


@dataclass(frozen=True)
class _Expired:
    id: uuid.UUID
    timeout: str  # as the YAML wrote it


def queue_expire() -> int:
    """End every queued execution past its version's queue_timeout; return how many."""
    with connection.cursor() as cursor:
        cursor.execute(queries["queued_past_timeout"])
        expired = rows_as(cursor, _Expired)
    # Only from queued: one promoted since the read keeps its slot and runs.
    return sum(
        execution_finish(
            row.id,
            status=Status.TIMED_OUT,
            error=f"queued longer than {row.timeout}",
            only_from=Status.QUEUED,
        )
        for row in expired
    )
