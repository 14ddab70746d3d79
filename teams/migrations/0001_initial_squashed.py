import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("teams", "0001_initial"),
        ("teams", "0002_named_limits"),
        ("teams", "0003_global_named_limits_and_rates"),
        ("teams", "0004_pause"),
    ]

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Team',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(unique=True)),
                ('name', models.CharField(blank=True, max_length=200)),
                ('max_concurrent_executions', models.PositiveIntegerField(blank=True, help_text='Blank: the mantle.yaml default. 0: unlimited.', null=True, validators=[django.core.validators.MinValueValidator(0)])),
                ('paused_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('members', models.ManyToManyField(blank=True, related_name='teams', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['slug'],
            },
        ),
        migrations.CreateModel(
            name='ApiKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(blank=True, max_length=200)),
                ('prefix', models.CharField(help_text='The first characters, for recognition.', max_length=12)),
                ('key_hash', models.CharField(max_length=64, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('last_used_at', models.DateTimeField(blank=True, null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='api_keys', to=settings.AUTH_USER_MODEL)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_keys', to='teams.team')),
            ],
            options={
                'verbose_name': 'API key',
            },
        ),
        migrations.CreateModel(
            name='NamedRate',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=63, validators=[django.core.validators.RegexValidator('^[a-z][a-z0-9_-]*$', 'lower case: ^[a-z][a-z0-9_-]*$')])),
                ('max', models.PositiveIntegerField(validators=[django.core.validators.MinValueValidator(1)])),
                ('period', models.DurationField()),
                ('per_key', models.BooleanField(default=False)),
                ('team', models.ForeignKey(blank=True, help_text='Blank: a global rate, shared by the steps of every team.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='named_rates', to='teams.team')),
            ],
            options={
                'ordering': ['team', 'name'],
                'constraints': [models.UniqueConstraint(fields=('team', 'name'), name='named_rate_unique_name'), models.UniqueConstraint(condition=models.Q(('team__isnull', True)), fields=('name',), name='named_rate_unique_global_name')],
            },
        ),
        migrations.CreateModel(
            name='NamedLimit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=63, validators=[django.core.validators.RegexValidator('^[a-z][a-z0-9_-]*$', 'lower case: ^[a-z][a-z0-9_-]*$')])),
                ('max', models.PositiveIntegerField(help_text='0: unlimited.')),
                ('paused_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('team', models.ForeignKey(blank=True, help_text='Blank: a global limit, shared by the steps of every team.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='named_limits', to='teams.team')),
            ],
            options={
                'ordering': ['team', 'name'],
                'constraints': [models.UniqueConstraint(fields=('team', 'name'), name='named_limit_unique_name'), models.UniqueConstraint(condition=models.Q(('team__isnull', True)), fields=('name',), name='named_limit_unique_global_name')],
            },
        ),
    ]
