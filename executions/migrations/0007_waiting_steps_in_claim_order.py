"""Waiting steps in claim order (docs/performance.md, Step-scope hand-off): each step row carries
its execution's priority, copied on insert by the step_team trigger as its team is, and waiting
steps are indexed per team in claim order, so that the limit-aware claim reads each team's first
few instead of ranking the whole backlog. The claim finds the limits it locks by a loose scan
of a second new index, the waiting steps' distinct sets of limits and rates. Steps already
stored get their execution's priority (only those whose priority is not the default 0 are
written). Installs executions/sql again, as its files are now: the trigger, mantle_claim_limited,
and mantle_admit's check for a queue waiting on the team (a scalar subquery, read by its index
whatever the statistics).
"""

from django.db import migrations, models
from django.db.models.functions import Coalesce

from executions import sql

_COPY_PRIORITIES = """
UPDATE executions_stepexecution s SET priority = e.priority
  FROM executions_execution e
 WHERE e.id = s.execution_id AND e.priority <> 0
"""


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0006_relabel_by_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="stepexecution",
            name="priority",
            field=models.IntegerField(default=0, editable=False),
        ),
        migrations.RunSQL(sql=_COPY_PRIORITIES, reverse_sql=migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="stepexecution",
            index=models.Index(
                "limit_ids",
                Coalesce("rate", 0, output_field=models.BigIntegerField()),
                condition=models.Q(("status", "waiting")),
                name="step_waiting_limits",
            ),
        ),
        migrations.AddIndex(
            model_name="stepexecution",
            index=models.Index(
                condition=models.Q(("status", "waiting")),
                fields=["team", "-priority", "id"],
                name="step_waiting_order",
            ),
        ),
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
