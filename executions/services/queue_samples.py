"""The dashboard's queue-depth history: a sample of every live queue each minute (django-q2's
schedule, engine/schedules.py), kept for two hours: the retention pass deletes older ones
(services/retention.py)."""

from __future__ import annotations

from django.db import connection

from executions.sql import queries


def queue_sample_record() -> int:
    """Sample every live queue now; returns the number of samples taken."""
    with connection.cursor() as cursor:
        cursor.execute(queries["queue_sample_record"])
        return cursor.rowcount
