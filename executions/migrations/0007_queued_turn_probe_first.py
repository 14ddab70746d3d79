"""The queued-turn trigger probes the key's turn before it writes one (mantle_queued_turn.sql):
installs executions/sql again, as its files are now (every statement there replaces what it
creates)."""

from django.db import migrations

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0006_relabel_by_key"),
    ]

    operations = [
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
