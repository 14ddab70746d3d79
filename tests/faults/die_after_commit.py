"""`python -m tests.faults.die_after_commit <execution id>`: finish an execution, then hang after
the commit, before the promotion that the commit schedules has run. The fault test kills this
process with SIGKILL there: a terminal state committed whose on-commit promotion never ran."""

from __future__ import annotations

import sys
import time
import uuid

import django

django.setup()

from django.db import transaction  # noqa: E402

from executions.models import Status  # noqa: E402
from executions.services.lifecycle import execution_finish  # noqa: E402


def hang() -> None:
    print("committed", flush=True)
    time.sleep(60)


def main(execution_id: str) -> None:
    with transaction.atomic():
        # Registered before execution_finish's executions_finished receiver registers
        # promotion's, so it runs first after the commit, and promotion's never runs.
        transaction.on_commit(hang)
        execution_finish(uuid.UUID(execution_id), status=Status.COMPLETED)


if __name__ == "__main__":
    main(sys.argv[1])
