"""Claims whose cost does not grow with the backlog (docs/performance.md, Claims): each step row
carries its execution's team, copied by a trigger on insert whatever the row's path, so that
pending steps can be indexed per team in claim order; pending executions are indexed per team
too. The claims then find the teams with work and read each team's next rows by index probes.

The SQL is frozen here as written when this migration was made.
"""

import django.db.models.deletion
import django.db.models.functions.comparison
from django.db import migrations, models

STEP_TEAM = r"""
UPDATE executions_stepexecution s SET team_id = e.team_id
  FROM executions_execution e WHERE e.id = s.execution_id;
CREATE FUNCTION mantle_step_team() RETURNS trigger LANGUAGE plpgsql AS $team$
BEGIN
    NEW.team_id := (SELECT team_id FROM executions_execution WHERE id = NEW.execution_id);
    RETURN NEW;
END
$team$;
CREATE TRIGGER step_team BEFORE INSERT ON executions_stepexecution
    FOR EACH ROW EXECUTE FUNCTION mantle_step_team();
"""

DROP_STEP_TEAM = r"""
DROP TRIGGER step_team ON executions_stepexecution;
DROP FUNCTION mantle_step_team();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0019_step_scope_limits"),
        ("teams", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="stepexecution",
            name="team",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="teams.team",
            ),
        ),
        migrations.RunSQL(STEP_TEAM, DROP_STEP_TEAM),
        migrations.AlterField(
            model_name="stepexecution",
            name="team",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                editable=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="teams.team",
            ),
        ),
        migrations.RemoveIndex(model_name="execution", name="execution_pending"),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("status", "pending")),
                fields=["team", "created_at", "id"],
                name="execution_pending",
            ),
        ),
        migrations.AddIndex(
            model_name="stepexecution",
            index=models.Index(
                models.F("team"),
                django.db.models.functions.comparison.Coalesce("fanout_index", 0),
                models.F("id"),
                condition=models.Q(("status", "pending")),
                name="step_claim_order",
            ),
        ),
    ]
