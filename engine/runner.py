"""One attempt of one step: claim it, run its action, heartbeat, settle it, move the execution on.

A claim is a conditional update (pending → running, with this attempt's lease owner), so two
workers handed the same step never both run an attempt. Every later write of the attempt is
conditional on that owner: once the reaper has taken an expired attempt over, the old owner's
writes change nothing.

The action runs in a thread; this thread heartbeats every HEARTBEAT seconds (renewing the lease
and reading the execution's status), and abandons the action on cancel, timeout or a lost lease
(`test/sleep` wakes up at once; an HTTP request is left to end in its abandoned thread).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Q, Value
from django.db.models.functions import Now
from django.utils import timezone

from engine import dispatch, orchestrator
from engine.actions import ActionContext, ActionFailed, get_action
from executions.models import Status, StepExecution, StepStatus
from workflows.expressions import ExpressionError, render
from workflows.schema import StepSpec, WorkflowSpec

HEARTBEAT = 0.5  # seconds; also bounds how long a cancelled step keeps running
BACKOFF_BASE = 1.0  # seconds before the 2nd attempt; exponential doubles it each attempt
BACKOFF_CAP = 60.0

_HEARTBEAT_SQL = """
UPDATE executions_stepexecution s
   SET lease_expires_at = now() + make_interval(secs => %(lease)s)
  FROM executions_execution e
 WHERE s.id = %(id)s AND s.status = 'running' AND s.lease_owner = %(owner)s
   AND e.id = s.execution_id
RETURNING e.status
"""


@dataclass(frozen=True)
class Outcome:
    status: str  # completed, failed or cancelled
    output: Any = None
    error: str = ""
    retryable: bool = True


def lease_from_now() -> ExpressionWrapper:
    lease = timedelta(seconds=settings.MANTLE.engine.step_lease)
    return ExpressionWrapper(Now() + Value(lease), output_field=DateTimeField())


def new_owner() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def run_step(step_id: int) -> None:
    step = StepExecution.objects.filter(id=step_id, status=StepStatus.PENDING).first()
    if step is None:
        return
    if step.not_before is not None:
        time.sleep(max(0.0, min((step.not_before - timezone.now()).total_seconds(), BACKOFF_CAP)))
    owner = new_owner()
    claimed = StepExecution.objects.filter(
        Q(not_before__isnull=True) | Q(not_before__lte=Now()),
        id=step_id,
        status=StepStatus.PENDING,
        attempt=step.attempt,
        execution__status=Status.RUNNING,
    ).update(
        status=StepStatus.RUNNING,
        lease_owner=owner,
        lease_expires_at=lease_from_now(),
        started_at=Now(),
    )
    if not claimed:
        return
    step = StepExecution.objects.select_related(
        "execution__version", "execution__workflow", "execution__team"
    ).get(id=step_id)
    outcome = _run(step, owner)
    if outcome is not None:
        settle(step_id, owner=owner, outcome=outcome)


def _run(step: StepExecution, owner: str) -> Outcome | None:
    execution = step.execution
    spec = WorkflowSpec.from_dict(execution.version.spec)
    step_spec = next(s for s in spec.steps if s.name == step.name)
    try:
        params = _params(step, step_spec)
        action = get_action(step_spec.action)
    except (ExpressionError, ActionFailed) as exc:
        return Outcome(StepStatus.FAILED, error=str(exc), retryable=False)
    cancelled = threading.Event()
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["output"] = action(params, ActionContext(cancelled=cancelled))
        except ActionFailed as exc:
            result["failure"] = Outcome(StepStatus.FAILED, output=exc.output, error=str(exc))
        except Exception as exc:
            result["failure"] = Outcome(StepStatus.FAILED, error=f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=target, name=f"step-{step.id}", daemon=True)
    started = time.monotonic()
    step_deadline = started + step_spec.timeout if step_spec.timeout else None
    workflow_deadline = orchestrator.workflow_deadline(execution, spec)
    thread.start()
    while True:
        thread.join(HEARTBEAT)
        if not thread.is_alive():
            break
        status = _heartbeat(step.id, owner)
        if status is None:  # the lease was lost: the reaper owns this attempt now
            cancelled.set()
            return None
        if status != Status.RUNNING:
            cancelled.set()
            return Outcome(StepStatus.CANCELLED, error=f"execution {status}", retryable=False)
        if workflow_deadline is not None and timezone.now() >= workflow_deadline:
            cancelled.set()
            return Outcome(StepStatus.CANCELLED, error="workflow timed out", retryable=False)
        if step_deadline is not None and time.monotonic() >= step_deadline:
            cancelled.set()
            return Outcome(StepStatus.FAILED, error=f"timed out after {step_spec.timeout:g}s")
    if "failure" in result:
        return result["failure"]
    return Outcome(StepStatus.COMPLETED, output=result.get("output"))


def _params(step: StepExecution, step_spec: StepSpec) -> Any:
    execution = step.execution
    rows = list(StepExecution.objects.filter(execution=execution))
    item = None
    if step.fanout_index is not None:
        parent = next(r for r in rows if r.name == step.name and r.fanout_index is None)
        item = (parent.items or [])[step.fanout_index]
    context = orchestrator.expression_context(execution, rows, item=item, index=step.fanout_index)
    return render(step_spec.params, context)


def _bounded(outcome: Outcome) -> Outcome:
    """Every later step of the execution reads a stored output, and the API returns it: one
    over limits.step_output_bytes is dropped and fails the step, naming the limit."""
    limit = settings.MANTLE.limits.step_output_bytes
    size = len(json.dumps(outcome.output, cls=DjangoJSONEncoder, ensure_ascii=False).encode())
    if size <= limit:
        return outcome
    error = f"the output is {size} bytes, over limits.step_output_bytes ({limit})"
    return Outcome(StepStatus.FAILED, error=error, retryable=False)


def _heartbeat(step_id: int, owner: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(
            _HEARTBEAT_SQL,
            {"lease": settings.MANTLE.engine.step_lease, "id": step_id, "owner": owner},
        )
        row = cursor.fetchone()
    return row[0] if row else None


def settle(step_id: int, *, owner: str, outcome: Outcome) -> bool:
    """End the attempt held by `owner` (a retry when attempts are left), then advance the
    execution. False when the attempt is no longer this owner's."""
    with transaction.atomic():
        step = (
            StepExecution.objects.select_for_update()
            .select_related("execution__version")
            .filter(id=step_id, status=StepStatus.RUNNING, lease_owner=owner)
            .first()
        )
        if step is None:
            return False
        outcome = _bounded(outcome)
        step.lease_owner, step.lease_expires_at = "", None
        step.output, step.error = outcome.output, outcome.error
        retry = _retry_delay(step, outcome)
        if retry is not None:
            step.status = StepStatus.PENDING
            step.attempt = F("attempt") + 1
            step.not_before = timezone.now() + timedelta(seconds=retry)
            transaction.on_commit(lambda: dispatch.start_steps([step_id]))
        else:
            step.status = outcome.status
            step.completed_at = timezone.now()
        step.save()
        execution_id = step.execution_id
    orchestrator.advance(execution_id)
    return True


def _retry_delay(step: StepExecution, outcome: Outcome) -> float | None:
    if outcome.status != StepStatus.FAILED or not outcome.retryable:
        return None
    spec = WorkflowSpec.from_dict(step.execution.version.spec)
    retry = next(s for s in spec.steps if s.name == step.name).retry
    if step.attempt >= retry.max_attempts:
        return None
    if retry.backoff == "exponential":
        return min(BACKOFF_BASE * 2 ** (step.attempt - 1), BACKOFF_CAP)
    return BACKOFF_BASE
