"""Delayed runs in one statement (docs/performance.md, Delayed runs in one statement): a team's
scheduled runs indexed in the order its batches admit them; the plain indexes of `team` and
`replay_of` dropped (execution_team_recent and execution_replays serve them), two fewer index
entries written by every insert and status change of an execution; and executions/sql
installed again, as its files are now, with mantle_admit_due, which admits a batch of due runs
of their workflow's current version, queueing FIFO tails behind their leader in one write."""

import django.db.models.deletion
from django.db import migrations, models

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0007_waiting_steps_in_claim_order"),
        ("teams", "0001_initial_squashed"),
    ]

    operations = [
        migrations.AlterField(
            model_name="execution",
            name="replay_of",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="replays",
                to="executions.execution",
            ),
        ),
        migrations.AlterField(
            model_name="execution",
            name="team",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="executions",
                to="teams.team",
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("status", "scheduled")),
                fields=["team", "run_at", "created_at"],
                name="execution_scheduled_order",
            ),
        ),
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
