"""Admission: the one place that decides pending, queued or rejected (CONTRACT §4).

A request, a CLI call, a cron tick and a webhook all come here. One transaction: lock the team,
then the workflow; count the slot holders; insert `pending`, insert `queued`, or reject without
writing anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models.functions import Now

from executions import dispatch, locks, metrics, sql
from executions.models import BlockedBy, Execution, Rejection, Status
from teams.models import Team, effective_team_limit
from workflows.models import OnLimit, WorkflowDefinition, WorkflowVersion
from workflows.schema import WorkflowSpec, validate_inputs


class ConcurrencyLimitExceeded(Exception):
    """The workflow rejects when full (`on_limit: reject`) and a limit is reached."""

    def __init__(self, *, scope: str, limit: int) -> None:
        self.scope = scope
        self.limit = limit
        super().__init__(f"{scope} concurrency limit of {limit} reached")


@dataclass(frozen=True)
class Admission:
    execution: Execution
    queue_position: int | None


@dataclass(frozen=True)
class AdmissionState:
    """What a newcomer is judged against, read under the team and workflow locks."""

    team_limit: int
    workflow_limit: int
    on_limit: str
    team_holders: int
    workflow_holders: int
    workflow_has_queue: bool
    team_has_blocked_queue: bool

    def blocked_by(self) -> str | None:
        """Why a newcomer must wait, or None. FIFO: it never overtakes a queued execution of its
        workflow, nor one of its team that waits for a team slot. The team is checked first."""
        if self.team_has_blocked_queue or _full(self.team_holders, self.team_limit):
            return BlockedBy.TEAM
        if self.workflow_has_queue or _full(self.workflow_holders, self.workflow_limit):
            return BlockedBy.WORKFLOW
        return None

    def limit_of(self, scope: str) -> int:
        return self.team_limit if scope == BlockedBy.TEAM else self.workflow_limit


def _full(holders: int, limit: int) -> bool:
    return limit > 0 and holders >= limit


def admit(
    *,
    team: Team,
    workflow: WorkflowDefinition,
    inputs: dict[str, Any] | None = None,
    trigger: dict[str, Any] | None = None,
    force: bool = False,
    idempotency_key: str | None = None,
) -> Admission:
    """Admit one execution of the workflow's current version.

    Raises workflows.schema.InvalidInputs before touching the database, and
    ConcurrencyLimitExceeded (nothing written) when the workflow rejects and is full.
    `force` admits as pending whatever the limits; the execution then holds a slot like any other.
    """
    version = workflow.current_version
    inputs = validate_inputs(WorkflowSpec.from_dict(version.spec), inputs)
    try:
        return _admit_locked(
            team=team,
            workflow=workflow,
            version=version,
            inputs=inputs,
            trigger=trigger,
            force=force,
            idempotency_key=idempotency_key,
        )
    except ConcurrencyLimitExceeded as rejected:
        # After the locked transaction rolled back (it would take this row with it), in a
        # transaction of its own: the record the dashboard counts rejections from.
        Rejection.objects.create(team=team, workflow=workflow, scope=rejected.scope)
        raise


def _admit_locked(
    *,
    team: Team,
    workflow: WorkflowDefinition,
    version: WorkflowVersion,
    inputs: dict[str, Any],
    trigger: dict[str, Any] | None,
    force: bool,
    idempotency_key: str | None,
) -> Admission:
    with transaction.atomic():
        locks.lock_team(team.id)
        locks.lock_workflows([workflow.id])
        blocked_by = None
        if not force:
            state = read_state(team_id=team.id, workflow_id=workflow.id)
            blocked_by = state.blocked_by()
            if blocked_by and state.on_limit == OnLimit.REJECT:
                metrics.count_rejection(team=team.slug, workflow=workflow.name, scope=blocked_by)
                raise ConcurrencyLimitExceeded(scope=blocked_by, limit=state.limit_of(blocked_by))
        execution = Execution.objects.create(
            team=team,
            workflow=workflow,
            version=version,
            status=Status.QUEUED if blocked_by else Status.PENDING,
            inputs=inputs,
            trigger=trigger or {},
            forced=force,
            blocked_by=blocked_by,
            idempotency_key=idempotency_key,
            queued_at=Now() if blocked_by else None,
        )
        if blocked_by is None:
            transaction.on_commit(lambda: dispatch.start_executions([execution.id]))
            return Admission(execution=execution, queue_position=None)
        # Both columns took the insert's statement_timestamp(); only created_at is returned.
        execution.queued_at = execution.created_at
        return Admission(execution=execution, queue_position=queue_position(execution))


def read_state(*, team_id: int, workflow_id: int) -> AdmissionState:
    with connection.cursor() as cursor:
        cursor.execute(sql.ADMISSION_STATE, {"team_id": team_id, "workflow_id": workflow_id})
        team_override, workflow_limit, on_limit, *counts = cursor.fetchone()
    return AdmissionState(effective_team_limit(team_override), workflow_limit, on_limit, *counts)


def queue_position(execution: Execution) -> int:
    """1-based place of a queued execution in its workflow's FIFO queue."""
    with connection.cursor() as cursor:
        cursor.execute(
            sql.QUEUE_POSITION,
            {
                "workflow_id": execution.workflow_id,
                "created_at": execution.created_at,
                "id": execution.id,
            },
        )
        return int(cursor.fetchone()[0])
