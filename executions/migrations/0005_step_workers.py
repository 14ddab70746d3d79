"""The step workers claim pending executions and steps from their tables (engine/worker.py):
indexes for the claims, and a NOTIFY on `mantle_work` (executions.sql.WORK_CHANNEL) from every
row that becomes pending, by whatever path (admission, promotion, the orchestrator, a retry).

The SQL is frozen here as written when this migration was made.
"""

from django.db import migrations, models

NOTIFY_WORK = r"""
CREATE FUNCTION mantle_notify_work() RETURNS trigger LANGUAGE plpgsql AS $notify$
BEGIN
    PERFORM pg_notify('mantle_work', '');
    RETURN NULL;
END
$notify$;
CREATE TRIGGER execution_pending_notify
    AFTER INSERT OR UPDATE OF status ON executions_execution
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION mantle_notify_work();
CREATE TRIGGER step_pending_notify
    AFTER INSERT OR UPDATE OF status, not_before ON executions_stepexecution
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION mantle_notify_work();
"""

DROP_NOTIFY_WORK = r"""
DROP TRIGGER step_pending_notify ON executions_stepexecution;
DROP TRIGGER execution_pending_notify ON executions_execution;
DROP FUNCTION mantle_notify_work();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0004_admission_function"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("status", "pending")),
                fields=["created_at"],
                name="execution_pending",
            ),
        ),
        migrations.AddIndex(
            model_name="stepexecution",
            index=models.Index(
                condition=models.Q(("status", "pending")),
                fields=["not_before"],
                name="step_pending",
            ),
        ),
        migrations.RunSQL(NOTIFY_WORK, DROP_NOTIFY_WORK),
    ]
