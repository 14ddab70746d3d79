"""Pause and resume a team, a workflow or a named limit (docs/operations.md, Pausing during an
incident).

A pause is a timestamp on the paused row, written under the locks admission and promotion take
for it (the team's, then the named limit's or the workflow's, in the lock order of core.locks).
Both read it after their own locks, so exactly: every execution that became pending did so in a
transaction that committed before the pause took its locks, and none becomes pending after the
pause commits (admission queues it `blocked_by: "paused"`, or rejects it with `on_pause:
reject`; promotion finds no free slot). Slot holders finish (drain) unless `cancel_running`,
which cancels them after the pause commits, each through the one terminal transition. A resume
clears the timestamp and promotes what now fits in the same transaction, in the usual order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Model, Q
from django.db.models.functions import Now

from core import locks
from executions.models import SLOT_HOLDING, Execution
from executions.services.lifecycle import ExecutionBusy, NotCancellable, execution_cancel
from executions.services.promotion import queue_promote
from teams.models import NamedLimit, Team
from workflows.models import WorkflowDefinition

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PauseChange:
    paused: bool  # the state now
    # Since when (None: not paused): the time of the statement that paused it, under the locks.
    paused_at: datetime | None
    changed: bool  # False: it already was in that state
    cancelled: int  # slot holders cancelled (cancel_running)
    promoted: int  # queued executions promoted (a resume)


def team_pause_set(*, team: Team, paused: bool, cancel_running: bool = False) -> PauseChange:
    return _pause_set(
        team_id=team.id,
        row=team,
        lock=lambda: None,
        holders=Q(team_id=team.id),
        paused=paused,
        cancel_running=cancel_running,
        reason=f"team {team.slug}",
    )


def workflow_pause_set(
    *, workflow: WorkflowDefinition, paused: bool, cancel_running: bool = False
) -> PauseChange:
    return _pause_set(
        team_id=workflow.team_id,
        row=workflow,
        lock=lambda: locks.lock_workflows([workflow.id]),
        holders=Q(workflow_id=workflow.id),
        paused=paused,
        cancel_running=cancel_running,
        reason=f"workflow {workflow.name}",
    )


def limit_pause_set(
    *, limit: NamedLimit, paused: bool, cancel_running: bool = False
) -> PauseChange:
    if limit.team_id is None:
        # A global limit holds steps only (docs/limits.md, Step scope): no admission reads it.
        raise ValueError(f"the global limit {limit.name} cannot be paused: pause its teams")
    return _pause_set(
        team_id=limit.team_id,
        row=limit,
        lock=lambda: locks.lock_named_limits([limit.id]),
        holders=Q(named_limits__contains=[limit.id]),
        paused=paused,
        cancel_running=cancel_running,
        reason=f"named limit {limit.name}",
    )


def _pause_set(
    *,
    team_id: int,
    row: Model,
    lock: Callable[[], None],
    holders: Q,
    paused: bool,
    cancel_running: bool,
    reason: str,
) -> PauseChange:
    with transaction.atomic():
        locks.lock_team(team_id)
        lock()
        rows = type(row)._default_manager.filter(pk=row.pk)
        changed = bool(
            rows.filter(paused_at__isnull=paused).update(paused_at=Now() if paused else None)
        )
        paused_at = rows.values_list("paused_at", flat=True).get()
        # Under the same locks: a pause relabels the queue it holds ("paused"); a resume
        # promotes what now fits, before any newcomer can be admitted ahead of it.
        promoted = queue_promote(team_id, trigger="pause" if paused else "resume")
    cancelled = 0
    if paused and cancel_running:
        cancelled = _cancel_holders(holders, reason=f"cancelled by the pause of {reason}")
    return PauseChange(
        paused=paused,
        paused_at=paused_at,
        changed=changed,
        cancelled=cancelled,
        promoted=len(promoted),
    )


def _cancel_holders(holders: Q, *, reason: str) -> int:
    """Cancel the slot holders, each in its own transaction: after the pause committed none
    joins them, so the list read once is complete."""
    cancelled = 0
    for execution_id in Execution.objects.filter(holders, status__in=SLOT_HOLDING).values_list(
        "id", flat=True
    ):
        try:
            execution_cancel(execution_id, reason=reason)
        except NotCancellable:
            continue  # it finished meanwhile
        except ExecutionBusy:
            logger.warning("pause: execution %s busy, not cancelled", execution_id)
            continue
        cancelled += 1
    return cancelled
