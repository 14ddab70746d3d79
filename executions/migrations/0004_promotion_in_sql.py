"""Promotion decided in the database, with the rules admission uses (docs/architecture.md,
Where the rules live): installs executions/sql again, as its files are now (the room of each
limit, mantle_room.sql; the full fair ranking, mantle_fair_queue.sql; mantle_promote.sql; and
mantle_fair_heads and mantle_admit reading the rooms; mantle_claim_limited returning as soon as
the limits it locked are full; every statement there replaces what it creates). The queue's labels other than a workflow's in one index (admission's two became its
prefixes), and the queued that hold a named limit in another, so that promotion reads what can
have changed, not the whole queue (docs/performance.md, Keys at scale).
"""

from django.db import migrations, models

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0003_replay_and_bulk"),
        ("teams", "0001_initial_squashed"),
        ("workflows", "0001_initial_squashed"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="execution",
            name="execution_team_blocked",
        ),
        migrations.RemoveIndex(
            model_name="execution",
            name="execution_limit_blocked",
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(
                    ("status", "queued"),
                    ("blocked_by__in", ["team", "key", "limit", "rate", "debounce", "paused"]),
                ),
                fields=["team", "blocked_by", "blocked_by_limit"],
                name="execution_queue_labelled",
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(
                    ("status", "queued"), models.Q(("named_limits", []), _negated=True)
                ),
                fields=["workflow", "named_limits"],
                name="execution_queued_limits",
            ),
        ),
        # Its arguments changed (the rate comes from the version, the moment from the caller).
        migrations.RunSQL(
            sql="DROP FUNCTION IF EXISTS mantle_fair_heads"
            "(bigint, integer, boolean, integer, boolean, integer, double precision)",
            reverse_sql=migrations.RunSQL.noop,
        ),
        # Its arguments changed too (whether to count the queue ahead for the caller).
        migrations.RunSQL(
            sql="DROP FUNCTION IF EXISTS mantle_admit(uuid, bigint, bigint, bigint, jsonb, jsonb,"
            " boolean, text, text, integer, integer, integer, integer, integer, integer, integer,"
            " integer, text)",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
