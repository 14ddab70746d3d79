"""mantle_admit stores a delayed run's run_at and a replay's original (replay_of) in its insert:
the batch admissions (services/batch_admission.py) no longer update every row they admitted
after it (docs/performance.md, figure 11). Installs executions/sql again, as its files are now
(every statement there replaces what it creates).
"""

from django.db import migrations

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0004_promotion_in_sql"),
    ]

    operations = [
        # Its arguments changed (run_at and replay_of at the end).
        migrations.RunSQL(
            sql="DROP FUNCTION IF EXISTS mantle_admit(uuid, bigint, bigint, bigint, jsonb, jsonb,"
            " boolean, text, text, integer, integer, integer, integer, integer, integer, integer,"
            " integer, text, boolean)",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
