"""Promotion's relabel by keys (docs/performance.md, Keys at scale): the queued executions
labelled 'workflow' indexed by key too, and those labelled 'key' by key (no longer among the
other labels), so that the relabel reads the keys that hold a slot or are labelled 'key', not
their queues; installs executions/sql again, as its files are now (every statement there
replaces what it creates): with them the queued-turn trigger's probe, promotion's generic plans
and relabel by class, and the limit-aware claim's probe by key, changed after it and before any
release reached a database.
"""

from django.db import migrations, models

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0005_admit_stores_run_at_and_replay_of"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="execution",
            name="execution_queue_labelled",
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(
                    ("status", "queued"),
                    ("blocked_by__in", ["team", "limit", "rate", "debounce", "paused"]),
                ),
                fields=["team", "blocked_by", "blocked_by_limit"],
                name="execution_queue_labelled",
            ),
        ),
        migrations.RemoveIndex(
            model_name="execution",
            name="execution_workflow_blocked",
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("blocked_by", "workflow"), ("status", "queued")),
                fields=["workflow", "concurrency_key"],
                name="execution_workflow_blocked",
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("blocked_by", "key"), ("status", "queued")),
                fields=["workflow", "concurrency_key"],
                name="execution_key_blocked",
            ),
        ),
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop),
    ]
