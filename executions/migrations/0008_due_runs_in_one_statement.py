"""Delayed runs in one statement (docs/performance.md, Delayed runs in one statement): installs
executions/sql again, as its files are now, with mantle_admit_due, which admits a batch of due
runs of their workflow's current version, their FIFO tails queued in one insert."""

from django.db import migrations

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0007_waiting_steps_in_claim_order"),
    ]

    operations = [
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
