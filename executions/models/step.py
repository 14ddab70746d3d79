"""Step executions: one row per attempt of a step or a fan-out branch (docs/architecture.md)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce, Now

from executions.models.execution import Execution
from teams.models import NamedRate, Team


class StepStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    # Its step-scope limits have no room for it yet (docs/limits.md, Step scope): it holds
    # nothing, neither units nor a worker slot, until a limit-aware claim makes it running.
    WAITING = "waiting"


class StepExecution(models.Model):
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="steps")
    # The execution's team, copied by the database on insert (executions/sql/triggers.sql,
    # step_team: whatever the row's path; an execution never changes team): the claim's index is per
    # team (step_claim_order). No constraint of its own: the row goes with its execution.
    team = models.ForeignKey(
        Team,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
        editable=False,
    )
    # The execution's priority, copied with its team (it never changes either): the limit-aware
    # claim reads each team's waiting steps in priority order from an index (step_waiting_order).
    priority = models.IntegerField(default=0, editable=False)
    name = models.CharField(max_length=200)
    fanout_index = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=StepStatus.choices)
    attempt = models.PositiveIntegerField(default=1)
    output = models.JSONField(null=True, blank=True)
    # On a fan-out step's parent row (fanout_index null): the items, one branch each.
    items = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    not_before = models.DateTimeField(null=True, blank=True)
    # Its step-scope named limits (ids, resolved when the row is created) and the units it holds
    # of each, in the same order: held while running, counted from these rows under each
    # limit's lock (docs/limits.md, Step scope). Empty for a step without `limits:`.
    limit_ids = ArrayField(models.BigIntegerField(), db_default=[], blank=True)
    limit_units = ArrayField(models.PositiveIntegerField(), db_default=[], blank=True)
    # Its step-scope rate (`rate_limit:`): the named rate's id, the units each claim counts in
    # its window, and the key value (evaluated when the row is created; "" when not per key).
    rate = models.ForeignKey(
        NamedRate, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    rate_units = models.PositiveIntegerField(default=0)
    rate_key = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "name", "fanout_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "name", "fanout_index"],
                name="step_unique_branch",
                nulls_distinct=False,
            )
        ]
        indexes = [
            models.Index(
                fields=["lease_expires_at"],
                name="step_running_leases",
                condition=Q(status=StepStatus.RUNNING),
            ),
            # Unfinished branches, counted per fan-out on every advance (orchestrator.py).
            models.Index(
                fields=["execution", "name"],
                name="step_unfinished",
                condition=Q(
                    status__in=[
                        StepStatus.PENDING,
                        StepStatus.WAITING,
                        StepStatus.RUNNING,
                        StepStatus.FAILED,
                    ],
                    fanout_index__isnull=False,
                ),
            ),
            # Pending steps: the earliest `not_before` (a retry's backoff).
            models.Index(
                fields=["not_before"],
                name="step_pending",
                condition=Q(status=StepStatus.PENDING),
            ),
            # Waiting steps: what the limit-aware claim serves (mantle_claim_limited).
            models.Index(
                fields=["not_before"],
                name="step_waiting",
                condition=Q(status=StepStatus.WAITING),
            ),
            # The distinct sets of limits and rates the waiting steps name: the limit-aware claim
            # finds the locks it takes by a loose scan of this index (mantle_claim_limited).
            models.Index(
                "limit_ids",
                Coalesce("rate", 0, output_field=models.BigIntegerField()),
                name="step_waiting_limits",
                condition=Q(status=StepStatus.WAITING),
            ),
            # Waiting steps per team in claim order: the limit-aware claim reads each team's
            # first few by index probes, not the whole backlog (docs/performance.md, Step-scope
            # hand-off).
            models.Index(
                fields=["team", "-priority", "id"],
                name="step_waiting_order",
                condition=Q(status=StepStatus.WAITING),
            ),
            # The claims of one step-scope rate in its trailing window.
            models.Index(
                fields=["rate", "rate_key", "started_at"],
                name="step_rate_window",
                condition=Q(rate__isnull=False),
            ),
            # The running holders of one step-scope limit: counted by every limit-aware claim.
            GinIndex(
                fields=["limit_ids"],
                name="step_limit_holders",
                condition=Q(status=StepStatus.RUNNING),
            ),
            # Pending steps per team in claim order (steps_claim in executions/sql/engine.sql):
            # the teams with work are found, and each team's next steps read, by index probes.
            models.Index(
                "team",
                Coalesce("fanout_index", 0),
                "id",
                name="step_claim_order",
                condition=Q(status=StepStatus.PENDING),
            ),
        ]

    def __str__(self) -> str:
        suffix = "" if self.fanout_index is None else f"[{self.fanout_index}]"
        return f"{self.name}{suffix} ({self.status})"
