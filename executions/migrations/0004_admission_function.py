"""mantle_admit: the whole locked part of admission as one PL/pgSQL function (executions/sql.py)."""

from django.db import migrations

from executions import sql


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0003_step_fanout_items"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.RunSQL(sql=sql.ADMIT_FUNCTION, reverse_sql=sql.DROP_ADMIT_FUNCTION),
    ]
