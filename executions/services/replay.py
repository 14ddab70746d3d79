"""Replay (docs/operations.md, Replaying after an incident): a new execution with an original's
inputs, trigger and priority, of the same version or the latest, admitted like any other (its
limits decided then; an Idempotency-Key honoured) and linked to it (`replay_of`).

`from_failed_step`: the steps that completed in the original are copied into the replay, with
their outputs, in the admission's transaction, so the replay starts with them done and the
engine runs from the first step that did not complete. Refused (VersionChanged) when the chosen
version defines any of those steps differently: their outputs would not be what it computes.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from executions.models import Execution, Status, StepExecution, StepStatus
from executions.services.admission import Admission, ConcurrencyLimitExceeded, execution_admit
from executions.services.idempotency import CONSTRAINT, constraint_of, original_admission
from workflows.models import WorkflowVersion
from workflows.schema import WorkflowSpec

SAME, LATEST = "same", "latest"
START, FAILED_STEP = "start", "failed_step"
RESUMABLE = (Status.FAILED, Status.CANCELLED, Status.TIMED_OUT)


class NotResumable(Exception):
    def __init__(self, status: str) -> None:
        self.status = status
        super().__init__(
            f"the execution is {status}: from failed_step needs one that ended failed, "
            "cancelled or timed out"
        )


class VersionChanged(Exception):
    def __init__(self, names: list[str], number: int) -> None:
        self.names = names
        super().__init__(
            f"version {number} changed the completed steps {names}: their outputs cannot be "
            'reused (replay from "start")'
        )


def execution_replay(
    *,
    original: Execution,
    version: str = SAME,
    start: str = START,
    idempotency_key: str | None = None,
) -> Admission:
    """Admit a replay of `original`; the original admission (`replayed`) for a key used before.

    Raises NotResumable and VersionChanged before anything is written, and what
    `execution_admit` raises (InvalidInputs for inputs the latest version refuses,
    ConcurrencyLimitExceeded), with nothing written.
    """
    workflow = original.workflow
    if idempotency_key is not None and (
        found := original_admission(original.team, workflow, idempotency_key)
    ):
        return found
    chosen = workflow.applied_version if version == LATEST else original.version
    reused = _reusable_steps(original, chosen) if start == FAILED_STEP else []
    try:
        with transaction.atomic():
            admission = execution_admit(
                team=original.team,
                workflow=workflow,
                inputs=original.inputs,
                trigger=original.trigger,
                priority=original.priority,
                idempotency_key=idempotency_key,
                version=chosen,
            )
            replay = admission.execution
            replay.replay_of_id, replay.reused_steps = original.id, len(reused)
            Execution.objects.filter(id=replay.id).update(
                replay_of_id=original.id, reused_steps=len(reused)
            )
            StepExecution.objects.bulk_create(
                StepExecution(
                    execution=replay,
                    name=row.name,
                    status=StepStatus.COMPLETED,
                    attempt=row.attempt,
                    output=row.output,
                    items=row.items,
                    started_at=row.started_at,
                    completed_at=row.completed_at,
                )
                for row in reused
            )
    except IntegrityError as exc:
        if idempotency_key is None or constraint_of(exc) != CONSTRAINT:
            raise
        found = original_admission(original.team, workflow, idempotency_key)
        assert found is not None, "the index said the key exists"
        return found
    except ConcurrencyLimitExceeded:
        # A racing replay under the same key may have taken the last slot: it is the original.
        if idempotency_key is not None and (
            found := original_admission(original.team, workflow, idempotency_key)
        ):
            return found
        raise
    return admission


def _reusable_steps(original: Execution, chosen: WorkflowVersion) -> list[StepExecution]:
    """The original's completed steps (their own rows: a fan-out's holds its outputs), checked
    against the chosen version's definitions of them."""
    if original.status not in RESUMABLE:
        raise NotResumable(original.status)
    completed = list(
        StepExecution.objects.filter(
            execution=original, fanout_index__isnull=True, status=StepStatus.COMPLETED
        ).order_by("id")
    )
    if chosen.id != original.version_id and completed:
        then = _steps(original.version.spec)
        now = _steps(chosen.spec)
        changed = sorted(row.name for row in completed if then.get(row.name) != now.get(row.name))
        if changed:
            raise VersionChanged(changed, chosen.number)
    return completed


def _steps(spec: dict[str, object]) -> dict[str, object]:
    return {step.name: step for step in WorkflowSpec.from_dict(spec).steps}
