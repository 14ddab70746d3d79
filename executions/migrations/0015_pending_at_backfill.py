"""Rate windows count what became pending before the rate-limit upgrade (docs/limits.md): 0013 added
pending_at, set by admission and promotion from then on, so an execution that became pending
before it kept NULL and counted in no window (a workflow given `rate_limit` just after the
upgrade could admit its max on top of what it had just run). This sets pending_at where it is
NULL on every execution that became pending, from the same clock admission and promotion use:
its promoted_at when it was promoted, else its created_at (admitted pending). It became pending
when it is pending or running, was promoted, or was never queued (admitted pending, forced or
not); one queued that ended without promotion (cancelled, superseded, timed out) never did and
keeps NULL, as does every one still queued.

Every such row, not only recent ones: a rate period has no upper bound, so no cut-off would be
exact. Reversing leaves the dates (0014's code reads them as its own).
"""

from django.db import migrations

BACKFILL = """
UPDATE executions_execution
   SET pending_at = coalesce(promoted_at, created_at)
 WHERE pending_at IS NULL
   AND status <> 'queued'
   AND (status IN ('pending', 'running') OR promoted_at IS NOT NULL OR queued_at IS NULL)
"""


class Migration(migrations.Migration):
    dependencies = [("executions", "0014_debounce")]

    operations = [migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop)]
