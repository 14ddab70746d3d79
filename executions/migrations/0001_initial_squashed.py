"""The executions' schema, and the SQL that lives in the database: the triggers
(executions/sql/triggers.sql) and the functions mantle_admit and mantle_claim_limited (their own
files beside it), installed from the files as they are (docs/architecture.md, The data room).

Squashed from the migrations of 0.1.0's development (`replaces`): a database made by them is
taken as up to date. A later change to a function or a trigger is a migration that runs
`executions.sql.install()` again (every statement there replaces what it creates);
tests/structure checks that the database runs what the files say.
"""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.db.models.deletion
import django.db.models.functions.comparison
import django.db.models.functions.datetime
import uuid
from django.db import migrations, models

from executions import sql


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("executions", "0001_initial"),
        ("executions", "0002_rejections_queue_samples_created_at_index"),
        ("executions", "0003_step_fanout_items"),
        ("executions", "0004_admission_function"),
        ("executions", "0005_step_workers"),
        ("executions", "0006_step_unfinished_branches"),
        ("executions", "0007_concurrency_keys"),
        ("executions", "0008_priority"),
        ("executions", "0009_strategies"),
        ("executions", "0010_bounds"),
        ("executions", "0011_bounded_holder_counts"),
        ("executions", "0012_named_limits"),
        ("executions", "0013_rate_limits"),
        ("executions", "0014_debounce"),
        ("executions", "0015_pending_at_backfill"),
        ("executions", "0016_admission_announced_after_commit"),
        ("executions", "0017_admission_generic_plans"),
        ("executions", "0018_lost_leases"),
        ("executions", "0019_step_scope_limits"),
        ("executions", "0020_step_team_claim_order"),
        ("executions", "0021_pause"),
        ("executions", "0022_scheduled"),
        ("executions", "0023_retention"),
        ("executions", "0024_per_key_limit_expressions"),
    ]

    dependencies = [
        ('teams', '0001_initial_squashed'),
        ('workflows', '0001_initial_squashed'),
    ]

    operations = [
        migrations.CreateModel(
            name='Execution',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('status', models.CharField(choices=[('scheduled', 'Scheduled'), ('queued', 'Queued'), ('pending', 'Pending'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('cancelled', 'Cancelled'), ('timed_out', 'Timed Out')], max_length=10)),
                ('inputs', models.JSONField(default=dict)),
                ('trigger', models.JSONField(default=dict)),
                ('forced', models.BooleanField(default=False)),
                ('blocked_by', models.CharField(blank=True, choices=[('team', 'Team'), ('workflow', 'Workflow'), ('key', 'Key'), ('limit', 'Limit'), ('rate', 'Rate'), ('debounce', 'Debounce'), ('paused', 'Paused')], max_length=8, null=True)),
                ('blocked_by_limit', models.CharField(blank=True, max_length=63, null=True)),
                ('named_limits', django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), blank=True, db_default=[], size=None)),
                ('idempotency_key', models.CharField(blank=True, max_length=255, null=True)),
                ('concurrency_key', models.CharField(blank=True, default='', max_length=200)),
                ('priority', models.PositiveSmallIntegerField(default=0)),
                ('key_limit', models.PositiveIntegerField(blank=True, null=True)),
                ('error', models.TextField(blank=True)),
                ('lost_leases', models.PositiveSmallIntegerField(db_default=0)),
                ('lost_lease_owner', models.CharField(blank=True, db_default='', max_length=100)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('queued_at', models.DateTimeField(blank=True, null=True)),
                ('promoted_at', models.DateTimeField(blank=True, null=True)),
                ('pending_at', models.DateTimeField(blank=True, null=True)),
                ('not_before', models.DateTimeField(blank=True, null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('completed_at', models.DateTimeField(blank=True, null=True)),
                ('run_at', models.DateTimeField(blank=True, null=True)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='executions', to='teams.team')),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='workflows.workflowversion')),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='executions', to='workflows.workflowdefinition')),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='QueueSample',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('queued', models.PositiveIntegerField()),
                ('running', models.PositiveIntegerField()),
                ('taken_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='workflows.workflowdefinition')),
            ],
        ),
        migrations.CreateModel(
            name='Rejection',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(choices=[('team', 'Team'), ('workflow', 'Workflow'), ('key', 'Key'), ('limit', 'Limit'), ('rate', 'Rate'), ('debounce', 'Debounce'), ('paused', 'Paused'), ('queue_full', 'Queue full')], max_length=10)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='teams.team')),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='workflows.workflowdefinition')),
            ],
        ),
        migrations.CreateModel(
            name='StepExecution',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200)),
                ('fanout_index', models.PositiveIntegerField(blank=True, null=True)),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('skipped', 'Skipped'), ('cancelled', 'Cancelled'), ('waiting', 'Waiting')], max_length=10)),
                ('attempt', models.PositiveIntegerField(default=1)),
                ('output', models.JSONField(blank=True, null=True)),
                ('items', models.JSONField(blank=True, null=True)),
                ('error', models.TextField(blank=True)),
                ('lease_owner', models.CharField(blank=True, max_length=100)),
                ('lease_expires_at', models.DateTimeField(blank=True, null=True)),
                ('not_before', models.DateTimeField(blank=True, null=True)),
                ('limit_ids', django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), blank=True, db_default=[], size=None)),
                ('limit_units', django.contrib.postgres.fields.ArrayField(base_field=models.PositiveIntegerField(), blank=True, db_default=[], size=None)),
                ('rate_units', models.PositiveIntegerField(default=0)),
                ('rate_key', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('completed_at', models.DateTimeField(blank=True, null=True)),
                ('execution', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='executions.execution')),
                ('rate', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='teams.namedrate')),
                ('team', models.ForeignKey(db_constraint=False, db_index=False, editable=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='teams.team')),
            ],
            options={
                'ordering': ['created_at', 'name', 'fanout_index'],
            },
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('status__in', ('pending', 'running'))), fields=['team', 'workflow'], name='execution_slot_holders'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('status__in', ('pending', 'running'))), fields=['workflow', 'concurrency_key'], name='execution_key_holders'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=django.contrib.postgres.indexes.GinIndex(condition=models.Q(('status__in', ('pending', 'running'))), fields=['named_limits'], name='execution_limit_holders'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('pending_at__isnull', False)), fields=['workflow', 'pending_at'], name='execution_rate_window'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('completed_at__isnull', False)), fields=['workflow', 'completed_at'], name='execution_finished'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('status', 'scheduled')), fields=['run_at'], name='execution_scheduled'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('not_before__isnull', False), ('status', 'queued')), fields=['not_before'], name='execution_debounced'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('status', 'queued')), fields=['team', 'created_at'], name='execution_team_queue'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('status', 'queued')), fields=['workflow', 'concurrency_key', '-priority', 'created_at', 'id'], name='execution_key_queue'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('blocked_by', 'team'), ('status', 'queued')), fields=['team'], name='execution_team_blocked'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('blocked_by', 'workflow'), ('status', 'queued')), fields=['workflow'], name='execution_workflow_blocked'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('blocked_by', 'limit'), ('status', 'queued')), fields=['team', 'blocked_by_limit'], name='execution_limit_blocked'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('promoted_at__isnull', False)), fields=['workflow', 'concurrency_key', 'promoted_at'], name='execution_key_promoted'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['team', 'created_at', 'id'], name='execution_pending'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(fields=['team', '-created_at'], name='execution_team_recent'),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(fields=['created_at', 'id'], name='execution_created_at'),
        ),
        migrations.AddConstraint(
            model_name='execution',
            constraint=models.UniqueConstraint(condition=models.Q(('idempotency_key__isnull', False)), fields=('team', 'idempotency_key'), name='execution_idempotency_key'),
        ),
        migrations.AddIndex(
            model_name='queuesample',
            index=models.Index(fields=['taken_at'], name='queuesample_taken_at'),
        ),
        migrations.AddIndex(
            model_name='rejection',
            index=models.Index(fields=['team', 'created_at'], name='rejection_team_recent'),
        ),
        migrations.AddIndex(
            model_name='stepexecution',
            index=models.Index(condition=models.Q(('status', 'running')), fields=['lease_expires_at'], name='step_running_leases'),
        ),
        migrations.AddIndex(
            model_name='stepexecution',
            index=models.Index(condition=models.Q(('fanout_index__isnull', False), ('status__in', ['pending', 'waiting', 'running', 'failed'])), fields=['execution', 'name'], name='step_unfinished'),
        ),
        migrations.AddIndex(
            model_name='stepexecution',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['not_before'], name='step_pending'),
        ),
        migrations.AddIndex(
            model_name='stepexecution',
            index=models.Index(condition=models.Q(('status', 'waiting')), fields=['not_before'], name='step_waiting'),
        ),
        migrations.AddIndex(
            model_name='stepexecution',
            index=models.Index(condition=models.Q(('rate__isnull', False)), fields=['rate', 'rate_key', 'started_at'], name='step_rate_window'),
        ),
        migrations.AddIndex(
            model_name='stepexecution',
            index=django.contrib.postgres.indexes.GinIndex(condition=models.Q(('status', 'running')), fields=['limit_ids'], name='step_limit_holders'),
        ),
        migrations.AddIndex(
            model_name='stepexecution',
            index=models.Index(models.F('team'), django.db.models.functions.comparison.Coalesce('fanout_index', 0), models.F('id'), condition=models.Q(('status', 'pending')), name='step_claim_order'),
        ),
        migrations.AddConstraint(
            model_name='stepexecution',
            constraint=models.UniqueConstraint(fields=('execution', 'name', 'fanout_index'), name='step_unique_branch', nulls_distinct=False),
        ),
        migrations.RunSQL(sql=sql.INSTALL, reverse_sql=sql.UNINSTALL),
    ]
