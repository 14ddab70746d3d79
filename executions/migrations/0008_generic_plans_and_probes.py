"""Promotion's functions and the queued-turn trigger plan their statements once per connection
(`SET plan_cache_mode = force_generic_plan`, as mantle_admit), the full relabel decides by class
(mantle_promote.sql, mantle_queued_limit_sets in mantle_room.sql), and the limit-aware claim
reads each waiting step's execution by its primary key alone (mantle_claim_limited.sql):
installs executions/sql again, as its files are now (every statement there replaces what it
creates)."""

from django.db import migrations

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0007_queued_turn_probe_first"),
    ]

    operations = [
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
