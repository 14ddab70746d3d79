import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("workflows", "0001_initial"),
        ("workflows", "0002_webhook_paths"),
        ("workflows", "0003_max_parallel_per_key"),
        ("workflows", "0004_strategies"),
        ("workflows", "0005_bounds"),
        ("workflows", "0006_named_limits"),
        ("workflows", "0007_rate_limits"),
        ("workflows", "0008_debounce"),
        ("workflows", "0009_webhook_auth"),
        ("workflows", "0010_pause"),
        ("workflows", "0011_retention"),
    ]

    dependencies = [
        ('teams', '0001_initial_squashed'),
    ]

    operations = [
        migrations.CreateModel(
            name='WorkflowDefinition',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('paused_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='workflows', to='teams.team')),
            ],
            options={
                'ordering': ['team', 'name'],
            },
        ),
        migrations.CreateModel(
            name='WorkflowVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('content', models.TextField()),
                ('content_hash', models.CharField(max_length=64)),
                ('spec', models.JSONField()),
                ('max_parallel_executions', models.PositiveIntegerField(default=0)),
                ('on_limit', models.CharField(choices=[('queue', 'Queue'), ('reject', 'Reject'), ('cancel_running', 'Cancel Running'), ('keep_latest', 'Keep Latest')], default='queue', max_length=14)),
                ('max_parallel_per_key', models.PositiveIntegerField(default=0)),
                ('max_queued', models.PositiveIntegerField(default=0)),
                ('limits', django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=63), blank=True, default=list, size=None)),
                ('rate_max', models.PositiveIntegerField(default=0)),
                ('rate_period', models.DurationField(blank=True, null=True)),
                ('rate_per_key', models.BooleanField(default=False)),
                ('debounce', models.DurationField(blank=True, null=True)),
                ('on_pause', models.CharField(blank=True, choices=[('', 'queue (cron ticks skipped)'), ('queue', 'Queue'), ('reject', 'Reject')], default='', max_length=6)),
                ('retention_completed', models.DurationField(blank=True, null=True)),
                ('retention_failed', models.DurationField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='workflows.workflowdefinition')),
            ],
            options={
                'ordering': ['workflow', '-number'],
            },
        ),
        migrations.AddField(
            model_name='workflowdefinition',
            name='current_version',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='workflows.workflowversion'),
        ),
        migrations.CreateModel(
            name='WebhookPath',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('path', models.TextField()),
                ('secret', models.TextField(null=True)),
                ('anonymous', models.BooleanField(default=False)),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='webhook_paths', to='workflows.workflowdefinition')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('path',), name='webhook_unique_path')],
            },
        ),
        migrations.AddConstraint(
            model_name='workflowversion',
            constraint=models.UniqueConstraint(fields=('workflow', 'number'), name='version_unique_number'),
        ),
        migrations.AddConstraint(
            model_name='workflowdefinition',
            constraint=models.UniqueConstraint(fields=('team', 'name'), name='workflow_unique_name_per_team'),
        ),
    ]
