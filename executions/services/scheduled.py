"""Delayed runs (docs/operations.md, Delayed runs): `scheduled` until their `run_at`, holding no
slot and counted by no limit, then admitted through admission by the engine clock, limits
decided then.

Due runs are admitted in batches of one team's, oldest run_at first (scheduled.sql): one
transaction locks the batch's rows (SKIP LOCKED: a second clock passes them over), deletes them
and admits an execution with each one's id, inputs, trigger, priority, Idempotency-Key and
run_at through mantle_admit: either the batch commits and its scheduled rows are gone, or none
of it happened. So however many clocks run, or die mid-pass and restart, each run is admitted
once. A run whose workflow still has the version it was scheduled with was checked then against
what it is checked against now: mantle_admit_due.sql admits those in one statement, with the key
each evaluates (from its inputs only when the workflow has a key expression). The others (a
version applied since) are checked again and admitted after them (services/batch_admission.py).
The batch holds its team's admission locks until it commits, so BATCH bounds how long the
team's other admissions wait. Rejected when due (a full `on_limit: reject` workflow,
`on_pause: reject`, inputs a newer version refuses), a run ends `failed` with the rejection as
its error.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from core import locks
from core.durations import parse_duration
from executions.models import Execution, Status
from executions.services.admission import Decision, Values, admission_values, key_is_fixed
from executions.services.batch_admission import (
    Run,
    admit_batch,
    cut_after_superseding,
    lock_parameters,
    settle,
)
from executions.services.lifecycle import execution_finish
from executions.sql import queries
from executions.sql.rows import rows_as
from teams.models import Team
from workflows.admission_values import priority_value
from workflows.models import WorkflowDefinition
from workflows.schema import InvalidInputs, WorkflowSpec, validate_inputs

logger = logging.getLogger(__name__)

# How far ahead a delayed run may be.
LONGEST_DELAY = timedelta(days=366)
# Due runs of one team admitted per transaction: the team's other admissions wait for at most
# one batch.
BATCH = 2000
# Seconds of batches per pass of the clock (every 0.25 s): its other jobs wait at most this.
PASS_BUDGET = 2.0
# Teams with due runs looked at per round of a pass.
TEAMS = 20


def run_time(*, run_at: object = None, delay: object = None) -> datetime:
    """A delayed run's time from `run_at` (RFC 3339, with its offset) or `delay` (a duration
    from now: "10m", "1h30m"). ValueError for both or neither, a bad value, or more than
    LONGEST_DELAY ahead; a time already past is due at once."""
    if (run_at is None) == (delay is None):
        raise ValueError("give run_at or delay (one of them)")
    now = timezone.now()
    try:
        if delay is not None:
            when = now + timedelta(seconds=parse_duration(delay))  # type: ignore[arg-type]
        else:
            when = datetime.fromisoformat(str(run_at).replace("Z", "+00:00"))
    except (TypeError, OverflowError) as exc:
        raise ValueError(str(exc)) from None
    if when.tzinfo is None:
        raise ValueError(f"{run_at!r} needs a time zone offset (RFC 3339), e.g. Z")
    if when - now > LONGEST_DELAY:
        raise ValueError(f"at most {LONGEST_DELAY.days} days ahead")
    return when


def execution_schedule(
    *,
    team: Team,
    workflow: WorkflowDefinition,
    run_at: datetime,
    inputs: dict[str, Any] | None = None,
    trigger: dict[str, Any] | None = None,
    priority: int | None = None,
    idempotency_key: str | None = None,
) -> Execution:
    """A delayed run of the workflow's current version, its inputs checked now (InvalidInputs)
    and again when it is admitted. `priority` None: the workflow's."""
    version = workflow.applied_version
    spec = WorkflowSpec.from_dict(version.spec)
    inputs = validate_inputs(spec, inputs)
    trigger = trigger or {}
    return Execution.objects.create(
        team=team,
        workflow=workflow,
        version=version,
        status=Status.SCHEDULED,
        inputs=inputs,
        trigger=trigger,
        # Evaluated now from what it is evaluated from when admitted: the same value.
        priority=priority_value(spec, inputs=inputs, trigger=trigger, given=priority),
        idempotency_key=idempotency_key,
        run_at=run_at,
    )


def scheduled_admit_due(*, budget: float = PASS_BUDGET) -> int:
    """Admit the runs now due (by the database's clock) in batches, until none is left that no
    other clock holds or `budget` seconds have passed; how many were handled (admitted or
    failed)."""
    deadline = time.monotonic() + budget
    handled = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(queries["scheduled_due_teams"], {"teams": TEAMS})
            teams = [team_id for (team_id,) in cursor.fetchall()]
        progressed = False
        for team_id in teams:
            batch = _admit_batch(team_id)
            handled += batch
            progressed = progressed or batch > 0
            if time.monotonic() > deadline:
                return handled
        if not progressed:
            return handled  # none due, or another clock holds them


def scheduled_next_due() -> float | None:
    """Seconds until the first scheduled run falls due (by the database's clock; 0 when one is
    due now), None when none is scheduled: the engine clock wakes then rather than at its next
    look, so a run's batch starts at its time."""
    with connection.cursor() as cursor:
        cursor.execute(queries["scheduled_next_due"])
        (seconds,) = cursor.fetchone()
    return None if seconds is None else max(0.0, seconds)


@dataclass(frozen=True)
class _Due:
    """A due run, locked (scheduled.sql, scheduled_due_lock); `current`: its workflow's version
    is still the one it was scheduled with."""

    id: uuid.UUID
    workflow_id: int
    current: bool


@dataclass(frozen=True)
class _Stored:
    """What a due run was scheduled with (scheduled_stored); inputs and trigger as JSON text."""

    id: uuid.UUID
    workflow_id: int
    inputs: str
    trigger: str
    priority: int
    idempotency_key: str | None
    version_id: int
    run_at: datetime


@dataclass(frozen=True)
class _Keyed:
    """A run admitted by mantle_admit_due, with the key and key limit it evaluated."""

    id: uuid.UUID
    workflow_id: int
    key: str
    key_limit: int | None


@dataclass(frozen=True)
class _Settled(Decision):
    """A row of mantle_admit_due: a run rejected, or one that superseded another."""

    id: uuid.UUID


def _admit_batch(team_id: int) -> int:
    """One batch of a team's due runs, in one transaction; how many it handled."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(queries["scheduled_due_lock"], {"team_id": team_id, "batch": BATCH})
        due = rows_as(cursor, _Due)
        if not due:
            return 0
        team = Team.objects.get(id=team_id)
        workflows = WorkflowDefinition.objects.select_related("current_version").in_bulk(
            {row.workflow_id for row in due}
        )
        fixed = {id_ for id_, w in workflows.items() if key_is_fixed(w.applied_version)}
        cursor.execute(
            queries["scheduled_stored"],
            {"ids": [row.id for row in due if not (row.current and row.workflow_id in fixed)]},
        )
        stored = {row.id: row for row in rows_as(cursor, _Stored)}
        current: list[_Keyed] = []
        changed: list[_Stored] = []
        for row in due:
            if row.current and row.workflow_id in fixed:
                current.append(_Keyed(row.id, row.workflow_id, "", None))
                continue
            run = stored[row.id]
            values = _values(workflows[row.workflow_id], run) if row.current else None
            if values is None:
                changed.append(run)
            else:
                current.append(_Keyed(row.id, row.workflow_id, values.key, values.key_limit))
        _admit_current(cursor, team, workflows, current)
        _admit_changed(cursor, team, workflows, changed)
    return len(due)


def _values(workflow: WorkflowDefinition, run: _Stored) -> Values | None:
    """The run's key and key limit from what it was scheduled with, by the version it was
    scheduled with (its workflow's current one); None when its key does not evaluate (it is
    then admitted with the others, and fails)."""
    try:
        return admission_values(
            workflow.applied_version, json.loads(run.inputs), json.loads(run.trigger), run.priority
        )
    except InvalidInputs:
        return None


def _admit_current(
    cursor: CursorWrapper,
    team: Team,
    workflows: dict[int, WorkflowDefinition],
    runs: list[_Keyed],
) -> None:
    for piece in cut_after_superseding(runs, lambda run: workflows[run.workflow_id]):
        keyed = any(run.key or run.key_limit is not None for run in piece)
        cursor.execute(
            queries["scheduled_admit"],
            {
                "ids": [run.id for run in piece],
                # None when every run is unkeyed: arrays are quoted element by element.
                "keys": [run.key for run in piece] if keyed else None,
                "key_limits": [run.key_limit for run in piece] if keyed else None,
                "key_locks": (
                    [locks.key_lock_id(run.workflow_id, run.key) for run in piece]
                    if keyed
                    else None
                ),
                **lock_parameters(team),
            },
        )
        workflow_of = {run.id: workflows[run.workflow_id] for run in piece}
        for settled in rows_as(cursor, _Settled):
            outcome = settle(team, workflow_of[settled.id], settled.id, settled)
            if isinstance(outcome, Exception):
                _refused(settled.id, outcome)  # its scheduled row is back


def _admit_changed(
    cursor: CursorWrapper,
    team: Team,
    workflows: dict[int, WorkflowDefinition],
    due: list[_Stored],
) -> None:
    """Runs checked again by the version applied since (or whose key does not evaluate)."""
    if not due:
        return
    runs = [
        Run(
            id=row.id,
            workflow=workflows[row.workflow_id],
            version=workflows[row.workflow_id].applied_version,
            inputs=json.loads(row.inputs),
            trigger=json.loads(row.trigger),
            priority=row.priority,
            idempotency_key=row.idempotency_key,
            run_at=row.run_at,
        )
        for row in due
    ]
    cursor.execute(queries["scheduled_delete"], {"ids": [run.id for run in runs]})
    outcomes = admit_batch(team, runs)
    for run, row, outcome in zip(runs, due, outcomes, strict=True):
        if isinstance(outcome, Exception):
            # Rejected, or refused by a version applied since: back, and failed.
            Execution.objects.create(
                id=run.id,
                team=team,
                workflow=run.workflow,
                version_id=row.version_id,
                status=Status.SCHEDULED,
                inputs=run.inputs,
                trigger=run.trigger,
                priority=row.priority,
                idempotency_key=run.idempotency_key,
                run_at=row.run_at,
            )
            _refused(run.id, outcome)


def _refused(execution_id: uuid.UUID, reason: Exception) -> None:
    logger.warning("delayed run %s rejected when due: %s", execution_id, reason)
    execution_finish(execution_id, status=Status.FAILED, error=f"rejected when due: {reason}")
