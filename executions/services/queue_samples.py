"""The dashboard's queue-depth history: a periodic sample of every live queue (a django-q2
schedule calls `queue_sample_record`), kept for two hours."""

from __future__ import annotations

from django.db import connection, transaction

# Only workflows with live executions get a row: a minute without one charts as an empty queue.
_RECORD = """
INSERT INTO executions_queuesample (workflow_id, queued, running, taken_at)
SELECT workflow_id,
       count(*) FILTER (WHERE status = 'queued'),
       count(*) FILTER (WHERE status IN ('pending', 'running')),
       statement_timestamp()
  FROM executions_execution
 WHERE status IN ('queued', 'pending', 'running')
 GROUP BY workflow_id
"""

_PRUNE = """
DELETE FROM executions_queuesample WHERE taken_at < statement_timestamp() - interval '2 hours'
"""


def queue_sample_record() -> int:
    """Sample every live queue now and drop old samples; returns the number of samples taken."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_RECORD)
        taken = cursor.rowcount
        cursor.execute(_PRUNE)
    return taken
