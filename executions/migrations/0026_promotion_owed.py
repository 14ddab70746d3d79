"""The promotion after a terminal commit decides without the team's lock whether it is owed
(executions/sql/mantle_promotion_owed.sql): an unlimited team with no queue finishes executions
without queueing behind its admissions for that lock.

The function is frozen here as rendered from executions/sql/ when this migration was written
(tests/structure/test_migrations.py checks it is what executions/sql builds now).
"""

from django.db import migrations

PROMOTION_OWED_FUNCTION = r"""
CREATE OR REPLACE FUNCTION mantle_promotion_owed(_team_id bigint, _team_namespace int)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $owed$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted
                  AND l.database = (SELECT d.oid FROM pg_database d
                                     WHERE d.datname = current_database())
                  AND l.classid = _team_namespace::oid AND l.objid = _team_id::oid
                  AND l.objsubid = 2) THEN
        RETURN true;
    END IF;
    RETURN EXISTS (SELECT 1 FROM executions_execution e
                    WHERE e.team_id = _team_id AND e.status = 'queued');
END
$owed$
"""


class Migration(migrations.Migration):
    dependencies = [("executions", "0025_key_turns")]

    operations = [
        migrations.RunSQL(
            sql=PROMOTION_OWED_FUNCTION,
            reverse_sql="DROP FUNCTION mantle_promotion_owed(bigint, int)",
        ),
    ]
