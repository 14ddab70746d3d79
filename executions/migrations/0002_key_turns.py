"""Fair promotion's cursor (docs/performance.md, Keys at scale): executions_keyturn, one row
per key of a workflow with a queue, read in round-robin order by mantle_fair_heads and kept no
later than the truth by the trigger function mantle_queued_turn when an execution is queued
(executions/sql/mantle_fair_heads.sql says why). Seeded with the keys queued now, each at its
head's place and its latest promotion.

Installs executions/sql again (docs/architecture.md, The data room): mantle_fair_heads, its
trigger function mantle_queued_turn and the trigger, and mantle_promotion_owed, the lockless
test of a terminal commit's promotion.
"""

import django.db.models.deletion
from django.db import migrations, models

from executions import sql

SEED_TURNS = """
INSERT INTO executions_keyturn
       (workflow_id, concurrency_key, priority, last_promoted_at, created_at, execution_id)
SELECT DISTINCT ON (q.workflow_id, q.concurrency_key)
       q.workflow_id, q.concurrency_key, q.priority,
       (SELECT coalesce(max(e.promoted_at), '-infinity') FROM executions_execution e
         WHERE e.workflow_id = q.workflow_id AND e.concurrency_key = q.concurrency_key
           AND e.promoted_at IS NOT NULL),
       q.created_at, q.id
  FROM executions_execution q
 WHERE q.status = 'queued'
 ORDER BY q.workflow_id, q.concurrency_key, q.priority DESC, q.created_at, q.id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0001_initial_squashed"),
        ("workflows", "0001_initial_squashed"),
    ]

    operations = [
        migrations.CreateModel(
            name="KeyTurn",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("concurrency_key", models.CharField(max_length=200)),
                ("priority", models.PositiveSmallIntegerField()),
                ("last_promoted_at", models.DateTimeField()),
                ("created_at", models.DateTimeField()),
                ("execution_id", models.UUIDField()),
                (
                    "workflow",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="workflows.workflowdefinition",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=[
                            "workflow",
                            "-priority",
                            "last_promoted_at",
                            "created_at",
                            "execution_id",
                        ],
                        name="keyturn_order",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("workflow", "concurrency_key"), name="keyturn_key"
                    )
                ],
            },
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("key_limit__isnull", False), ("status", "queued")),
                fields=["workflow", "concurrency_key"],
                name="execution_key_limit_queued",
            ),
        ),
        migrations.RunSQL(
            sql=sql.INSTALL,
            reverse_sql="DROP TRIGGER IF EXISTS execution_queued_turn ON executions_execution",
        ),
        migrations.RunSQL(sql=SEED_TURNS, reverse_sql=migrations.RunSQL.noop),
    ]
