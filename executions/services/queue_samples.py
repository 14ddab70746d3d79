"""The dashboard's queue-depth history: a periodic sample of every live queue (a django-q2
schedule calls `queue_sample_record`), kept for two hours."""

from __future__ import annotations

from django.db import connection, transaction

from executions.sql import queries


def queue_sample_record() -> int:
    """Sample every live queue now and drop old samples; returns the number of samples taken."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(queries["queue_sample_record"])
        taken = cursor.rowcount
        cursor.execute(queries["queue_sample_prune"])
    return taken
