"""Admission: the one place that decides pending, queued or rejected (CONTRACT §4).

A request, a CLI call, a cron tick and a webhook all come here. One transaction: lock the team,
then the workflow; count the slot holders; insert `pending`, insert `queued`, or reject without
writing anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

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


_SPECS: dict[tuple[int, str], WorkflowSpec] = {}


def _spec(version: WorkflowVersion) -> WorkflowSpec:
    """A version never changes, so its parsed spec is kept, keyed by id and content hash."""
    key = (version.id, version.content_hash)
    spec = _SPECS.get(key)
    if spec is None:
        if len(_SPECS) >= 1024:
            _SPECS.clear()
        spec = _SPECS[key] = WorkflowSpec.from_dict(version.spec)
    return spec


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
    inputs = validate_inputs(_spec(version), inputs)
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
        locks.lock_team_and_workflow(team.id, workflow.id)
        blocked_by = None
        if not force:
            state = read_state(team_id=team.id, workflow_id=workflow.id)
            blocked_by = state.blocked_by()
            if blocked_by and state.on_limit == OnLimit.REJECT:
                metrics.count_rejection(team=team.slug, workflow=workflow.name, scope=blocked_by)
                raise ConcurrencyLimitExceeded(scope=blocked_by, limit=state.limit_of(blocked_by))
        execution = _insert(
            team=team,
            workflow=workflow,
            version=version,
            status=Status.QUEUED if blocked_by else Status.PENDING,
            inputs=inputs,
            trigger=trigger or {},
            forced=force,
            blocked_by=blocked_by,
            idempotency_key=idempotency_key,
        )
        if blocked_by is None:
            dispatch.start_executions_with_transaction([execution.id])
            return Admission(execution=execution, queue_position=None)
        return Admission(execution=execution, queue_position=queue_position(execution))


def _insert(
    *, team: Team, workflow: WorkflowDefinition, version: WorkflowVersion, **fields: Any
) -> Execution:
    """One INSERT … RETURNING, without the ORM's per-row work (no signal listens to inserts)."""
    with connection.cursor() as cursor:
        cursor.execute(
            sql.ADMISSION_INSERT,
            {
                **fields,
                "team_id": team.id,
                "workflow_id": workflow.id,
                "version_id": version.id,
                "inputs": json.dumps(fields["inputs"]),
                "trigger": json.dumps(fields["trigger"]),
            },
        )
        execution_id, created_at, queued_at = cursor.fetchone()
    execution = Execution(
        id=execution_id,
        team=team,
        workflow=workflow,
        version=version,
        created_at=created_at,
        queued_at=queued_at,
        **fields,
    )
    execution._state.adding = False
    execution._state.db = connection.alias
    return execution


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
