from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from teams.models import Team


class OnLimit(models.TextChoices):
    QUEUE = "queue"
    REJECT = "reject"
    CANCEL_RUNNING = "cancel_running"
    KEEP_LATEST = "keep_latest"


class OnPause(models.TextChoices):
    # Unset: admitted queued like QUEUE, but a cron tick of the paused workflow is skipped.
    UNSET = "", "queue (cron ticks skipped)"
    QUEUE = "queue"
    REJECT = "reject"


class WorkflowDefinition(models.Model):
    """A team's named workflow; its behaviour lives in its versions, the newest being current."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="workflows")
    name = models.CharField(max_length=200)
    current_version = models.ForeignKey(
        "WorkflowVersion", null=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Paused (docs/operations.md, Pausing during an incident): none of its executions becomes
    # pending; kept across versions. Changed only under its team's and its own lock
    # (executions.services.pauses).
    paused_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["team", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="workflow_unique_name_per_team")
        ]

    def __str__(self) -> str:
        return f"{self.team}/{self.name}"

    @property
    def applied_version(self) -> WorkflowVersion:
        """The current version. workflow_apply writes a definition and its first version in one
        transaction, so none is seen without one."""
        if self.current_version is None:
            raise WorkflowVersion.DoesNotExist(f"workflow {self} has no version")
        return self.current_version


class WorkflowVersion(models.Model):
    """An immutable version: the YAML as submitted, its parsed spec and its limits as columns."""

    workflow = models.ForeignKey(
        WorkflowDefinition, on_delete=models.CASCADE, related_name="versions"
    )
    number = models.PositiveIntegerField()
    content = models.TextField()
    content_hash = models.CharField(max_length=64)
    spec = models.JSONField()
    max_parallel_executions = models.PositiveIntegerField(default=0)
    on_limit = models.CharField(max_length=14, choices=OnLimit.choices, default=OnLimit.QUEUE)
    max_parallel_per_key = models.PositiveIntegerField(default=0)
    # Queued executions of the workflow (of one key when keyed); 0 = unbounded.
    max_queued = models.PositiveIntegerField(default=0)
    # The team's named limits its executions hold a slot of (`limits:`), by name.
    limits = ArrayField(models.CharField(max_length=63), default=list, blank=True)
    # rate_limit: at most rate_max executions become pending per trailing rate_period (per key
    # when rate_per_key); rate_max 0 = none.
    rate_max = models.PositiveIntegerField(default=0)
    rate_period = models.DurationField(null=True, blank=True)
    rate_per_key = models.BooleanField(default=False)
    # debounce: an execution starts only after this long without a newer one of its key.
    debounce = models.DurationField(null=True, blank=True)
    # on_pause: what a pause does to a newcomer (queue it, or reject it 429 `paused`).
    on_pause = models.CharField(max_length=6, choices=OnPause.choices, blank=True, default="")
    # retention: how long its finished executions are kept; null: mantle.yaml's; 0: for ever.
    retention_completed = models.DurationField(null=True, blank=True)
    retention_failed = models.DurationField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workflow", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["workflow", "number"], name="version_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.workflow} v{self.number}"


class WebhookPath(models.Model):
    """A webhook trigger of a current version: `POST /hooks/<path>` carries no team, so the
    path alone finds its workflow, by this table's unique index (one path, one workflow, across
    all teams). Rewritten with the workflow's current version (workflows.services)."""

    path = models.TextField()
    workflow = models.ForeignKey(
        WorkflowDefinition, on_delete=models.CASCADE, related_name="webhook_paths"
    )
    secret = models.TextField(null=True)
    # `auth: none`: no signature and no API key asked (docs/hostile-input.md).
    anonymous = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["path"], name="webhook_unique_path")]

    def __str__(self) -> str:
        return self.path
