"""Promotion's functions and the queued-turn trigger plan their statements once per connection
(`SET plan_cache_mode = force_generic_plan`, as mantle_admit): installs executions/sql again, as
its files are now (every statement there replaces what it creates)."""

from django.db import migrations

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0007_queued_turn_probe_first"),
    ]

    operations = [
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
