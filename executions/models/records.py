"""What executions leave behind besides themselves: rejections, queue samples and bulk actions."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from executions.models.execution import BlockedBy
from teams.models import Team
from workflows.models import WorkflowDefinition


class Rejection(models.Model):
    """An admission refused by a limit (`on_limit: reject`). Rejected admissions write no
    execution, so this is what "rejected in the last hour" counts."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    workflow = models.ForeignKey(WorkflowDefinition, on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(
        max_length=10, choices=[*BlockedBy.choices, ("queue_full", "Queue full")]
    )
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["team", "created_at"], name="rejection_team_recent")]


class QueueSample(models.Model):
    """Queue depth of one workflow at one moment, for the dashboard's chart. Only non-empty
    states are written, so a missing sample means an empty queue."""

    workflow = models.ForeignKey(WorkflowDefinition, on_delete=models.CASCADE, related_name="+")
    queued = models.PositiveIntegerField()
    running = models.PositiveIntegerField()
    taken_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["taken_at"], name="queuesample_taken_at")]


class BulkStatus(models.TextChoices):
    RUNNING = "running"
    COMPLETED = "completed"


class BulkAction(models.Model):
    """A cancel or replay of every execution a filter matched (docs/operations.md, Bulk
    actions): the ids are fixed when it is made, then handled in batches by the engine clock,
    each batch and its progress in one transaction (executions.services.bulk)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=10, choices=[("cancel", "cancel"), ("replay", "replay")])
    filter = models.JSONField(default=dict)
    # A replay's options: {"version": "same" | "latest", "from": "start" | "failed_step"}.
    options = models.JSONField(default=dict)
    execution_ids = ArrayField(models.UUIDField())
    # How many of execution_ids were handled: the next batch starts there.
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # The first errors, "<execution id>: <reason>", at most services.bulk.ERRORS_KEPT.
    errors = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=BulkStatus.choices)
    created_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["created_at"],
                name="bulk_running",
                condition=Q(status=BulkStatus.RUNNING),
            ),
            models.Index(fields=["team", "-created_at"], name="bulk_team_recent"),
        ]

    @property
    def matched(self) -> int:
        return len(self.execution_ids)
