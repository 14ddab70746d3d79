from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce, Now

from teams.models import NamedRate, Team
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
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="executions")
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
    # original may be pruned by retention before its replay; the id stays as a record.
    replay_of = models.ForeignKey(
        "self",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
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
            # Delayed runs by due time: the engine clock admits them.
            models.Index(
                fields=["run_at"],
                name="execution_scheduled",
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
            # but the workflow's, for promotion's relabel (docs/performance.md, Keys at scale).
            models.Index(
                fields=["team", "blocked_by", "blocked_by_limit"],
                name="execution_queue_labelled",
                condition=Q(status=Status.QUEUED)
                & Q(blocked_by__in=[b for b in BlockedBy if b != BlockedBy.WORKFLOW]),
            ),
            models.Index(
                fields=["workflow"],
                name="execution_workflow_blocked",
                condition=Q(status=Status.QUEUED, blocked_by=BlockedBy.WORKFLOW),
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
