"""Installs executions/sql again (docs/architecture.md, The data room): mantle_claim_limited
returns as soon as the limits it locked are full (docs/performance.md, Step-scope hand-off)."""

from django.db import migrations

from executions import sql


class Migration(migrations.Migration):
    dependencies = [("executions", "0003_replay_and_bulk")]

    operations = [migrations.RunSQL(sql=sql.INSTALL, reverse_sql=migrations.RunSQL.noop)]
