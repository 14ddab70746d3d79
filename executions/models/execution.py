"""Executions: their statuses, what holds a slot, and the fair-promotion cursor of each key
(docs/architecture.md)."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from teams.models import Team
from workflows.models import WorkflowDefinition, WorkflowVersion


class Status(models.TextChoices):
    # A delayed run: holds nothing and is counted nowhere until admitted at run_at.
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


SLOT_HOLDING = (Status.PENDING, Status.RUNNING)
QUEUED_OR_HOLDING = (Status.QUEUED, *SLOT_HOLDING)
TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT)


class BlockedBy(models.TextChoices):
    TEAM = "team"
    WORKFLOW = "workflow"
    KEY = "key"
    LIMIT = "limit"
    RATE = "rate"
    DEBOUNCE = "debounce"
    # Its workflow, its team or one of its named limits is paused (executions.services.pauses).
    PAUSED = "paused"


class Execution(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by execution_team_recent (the team first): an index of its own was written on
    # every insert and status change for nothing (docs/performance.md, Delayed runs in one
    # statement).
    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="executions", db_index=False
    )
    workflow = models.ForeignKey(
        WorkflowDefinition, on_delete=models.CASCADE, related_name="executions"
    )
    version = models.ForeignKey(WorkflowVersion, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices)
    inputs = models.JSONField(default=dict)
    trigger = models.JSONField(default=dict)
    forced = models.BooleanField(default=False)
    blocked_by = models.CharField(max_length=8, choices=BlockedBy.choices, null=True, blank=True)
    # The named limit that blocks it, by name, when blocked_by is "limit".
    blocked_by_limit = models.CharField(max_length=63, null=True, blank=True)
    # The ids of the team's named limits it holds a slot of while pending or running, resolved
    # from its workflow's `limits:` by admission under the locks.
    named_limits = ArrayField(models.BigIntegerField(), db_default=[], blank=True)
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)
    # The value of the workflow's concurrency_key, evaluated once at admission; "" when the
    # workflow has none (workflows.admission_values).
    concurrency_key = models.CharField(max_length=200, blank=True, default="")
    # 0-9, evaluated once at admission: a queue is promoted highest first, FIFO among equals.
    priority = models.PositiveSmallIntegerField(default=0)
    # The workflow's max_parallel_per_key when an expression gives it, evaluated once at
    # admission (workflows.admission_values); null: the current version's count applies.
    key_limit = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    # Workers that died holding steps of this execution (one count per worker, the last one's
    # name beside it): at reaper.QUARANTINE_LOST_LEASES the execution fails instead of going to
    # the next worker (docs/hostile-input.md).
    lost_leases = models.PositiveSmallIntegerField(db_default=0)
    lost_lease_owner = models.CharField(max_length=100, blank=True, db_default="")
    # statement_timestamp() of the insert, which runs after the advisory locks are held: admission
    # order within a team, and so the FIFO order of the queue.
    created_at = models.DateTimeField(db_default=Now())
    queued_at = models.DateTimeField(null=True, blank=True)
    promoted_at = models.DateTimeField(null=True, blank=True)
    # When it became pending (admitted pending, or promoted): what a rate limit counts.
    pending_at = models.DateTimeField(null=True, blank=True)
    # Debounced: not promoted before this (its admission + the workflow's debounce); cleared
    # once due, when it waits like any queued execution.
    not_before = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # A delayed run's time (docs/operations.md, Delayed runs): admitted by the engine clock
    # once due; kept after.
    run_at = models.DateTimeField(null=True, blank=True)
    # A replay's original (docs/operations.md, Replaying after an incident). No constraint: the
    # original may be pruned by retention before its replay; the id stays as a record. Indexed
    # by execution_replays, on the rows that have one.
    replay_of = models.ForeignKey(
        "self",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        blank=True,
        related_name="replays",
    )
    # Steps copied completed from the original (a replay `from: failed_step`): the engine reads
    # an execution's step rows when it starts only when there are some.
    reused_steps = models.PositiveIntegerField(db_default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Slot holders: counted on every admission and promotion.
            models.Index(
                fields=["team", "workflow"],
                name="execution_slot_holders",
                condition=Q(status__in=SLOT_HOLDING),
            ),
            # Slot holders of one key: counted by admission for a keyed workflow.
            models.Index(
                fields=["workflow", "concurrency_key"],
                name="execution_key_holders",
                condition=Q(status__in=SLOT_HOLDING),
            ),
            # Slot holders of one named limit: counted by admission and promotion.
            GinIndex(
                fields=["named_limits"],
                name="execution_limit_holders",
                condition=Q(status__in=SLOT_HOLDING),
            ),
            # The executions of a workflow that became pending in a rate limit's window.
            models.Index(
                fields=["workflow", "pending_at"],
                name="execution_rate_window",
                condition=Q(pending_at__isnull=False),
            ),
            # Finished executions of a workflow by age: what retention deletes.
            models.Index(
                fields=["workflow", "completed_at"],
                name="execution_finished",
                condition=Q(completed_at__isnull=False),
            ),
            # Delayed runs by due time: the engine clock wakes for the first, and admits a
            # team's in batches in this order.
            models.Index(
                fields=["run_at"],
                name="execution_scheduled",
                condition=Q(status=Status.SCHEDULED),
            ),
            models.Index(
                fields=["team", "run_at", "created_at"],
                name="execution_scheduled_order",
                condition=Q(status=Status.SCHEDULED),
            ),
            # Debounced executions by due time: the engine clock promotes their teams.
            models.Index(
                fields=["not_before"],
                name="execution_debounced",
                condition=Q(status=Status.QUEUED, not_before__isnull=False),
            ),
            # The queue in FIFO order, per team; per key of a workflow (unkeyed executions share
            # the key "") in promotion order: a key's head, its positions, the workflow's queue.
            models.Index(
                fields=["team", "created_at"],
                name="execution_team_queue",
                condition=Q(status=Status.QUEUED),
            ),
            models.Index(
                fields=["workflow", "concurrency_key", "-priority", "created_at", "id"],
                name="execution_key_queue",
                condition=Q(status=Status.QUEUED),
            ),
            # Whether a queued execution of a key stored its own key limit: fair promotion asks
            # it of each key it reads (one probe, however long the key's queue).
            models.Index(
                fields=["workflow", "concurrency_key"],
                name="execution_key_limit_queued",
                condition=Q(status=Status.QUEUED, key_limit__isnull=False),
            ),
            # What waits for a team, a named limit (by name) or a workflow slot: a newcomer queues
            # behind it (a key's long queue is not scanned for that); the first holds every label
            # but the workflow's and the key's, for promotion's relabel to see whether any is
            # queued (docs/performance.md, Keys at scale).
            models.Index(
                fields=["team", "blocked_by", "blocked_by_limit"],
                name="execution_queue_labelled",
                condition=Q(status=Status.QUEUED)
                & Q(
                    blocked_by__in=[
                        b for b in BlockedBy if b not in (BlockedBy.WORKFLOW, BlockedBy.KEY)
                    ]
                ),
            ),
            # ... and, by key, what waits for a workflow slot or for its key's: promotion's
            # relabel finds the keys labelled 'key' and reads a key's executions labelled
            # otherwise than it judges the key.
            models.Index(
                fields=["workflow", "concurrency_key"],
                name="execution_workflow_blocked",
                condition=Q(status=Status.QUEUED, blocked_by=BlockedBy.WORKFLOW),
            ),
            models.Index(
                fields=["workflow", "concurrency_key"],
                name="execution_key_blocked",
                condition=Q(status=Status.QUEUED, blocked_by=BlockedBy.KEY),
            ),
            # The queued holding a named limit: promotion reads which (none: one probe).
            models.Index(
                fields=["workflow", "named_limits"],
                name="execution_queued_limits",
                condition=Q(status=Status.QUEUED) & ~Q(named_limits=[]),
            ),
            # The latest promotion of each key: fair promotion serves the least recent first.
            models.Index(
                fields=["workflow", "concurrency_key", "promoted_at"],
                name="execution_key_promoted",
                condition=Q(promoted_at__isnull=False),
            ),
            # Pending executions per team, oldest first: what the step workers start, a team at
            # a time (executions_claim in executions/sql/engine.sql).
            models.Index(
                fields=["team", "created_at", "id"],
                name="execution_pending",
                condition=Q(status=Status.PENDING),
            ),
            models.Index(fields=["team", "-created_at"], name="execution_team_recent"),
            # An execution's replays (`replays` in its JSON).
            models.Index(
                fields=["replay_of"],
                name="execution_replays",
                condition=Q(replay_of__isnull=False),
            ),
            # The admin's changelist: newest first, and its date hierarchy's min/max.
            models.Index(fields=["created_at", "id"], name="execution_created_at"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "idempotency_key"],
                name="execution_idempotency_key",
                condition=Q(idempotency_key__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.workflow.name} {self.id} ({self.status})"


class KeyTurn(models.Model):
    """Fair promotion's cursor (docs/performance.md, Keys at scale): one row per key of a
    workflow with a queue, holding a lower bound of that key's place in the round-robin (its
    head's priority, its latest promotion, its head's age and id), so promotion reads the keys
    in that order from an index instead of visiting every key. Never a slot count: every limit
    is still decided by counting executions; mantle_fair_heads.sql says why its drift cannot
    change a decision."""

    workflow = models.ForeignKey(WorkflowDefinition, on_delete=models.CASCADE, related_name="+")
    concurrency_key = models.CharField(max_length=200)
    priority = models.PositiveSmallIntegerField()
    # -infinity: never promoted (served first, as fair_queue_heads' NULLS FIRST).
    last_promoted_at = models.DateTimeField()
    created_at = models.DateTimeField()
    execution_id = models.UUIDField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow", "concurrency_key"], name="keyturn_key")
        ]
        indexes = [
            models.Index(
                fields=["workflow", "-priority", "last_promoted_at", "created_at", "execution_id"],
                name="keyturn_order",
            )
        ]
