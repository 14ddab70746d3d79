"""One attempt of one step: prepare it, run its action, settle it, move the execution on.

The step worker (worker.py) claims the attempt (pending → running, with its lease owner and the
attempt number) and calls these three in turn: `prepare` and `settle` on a database thread,
`perform` on the event loop. Every write of an attempt is conditional on (id, running, owner,
attempt): once the reaper has taken an expired attempt over, the old owner's writes change
nothing, even when the new attempt is claimed by the same process.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import F
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from engine import orchestrator
from engine.actions import Action, ActionContext, ActionFailed, get_action
from executions.models import StepExecution, StepStatus
from workflows.expressions import ExpressionError, find_expressions, render
from workflows.schema import StepSpec

BACKOFF_BASE = 1.0  # seconds before the 2nd attempt; exponential doubles it each attempt
BACKOFF_CAP = 60.0


@dataclass(frozen=True)
class Outcome:
    status: str  # completed, failed or cancelled
    output: Any = None
    error: str = ""
    retryable: bool = True


@dataclass(frozen=True)
class Prepared:
    action: Action
    params: Any
    timeout: float | None  # the step's own
    deadline: datetime | None  # the workflow's


def prepare(step_id: int) -> Prepared | Outcome:
    """The action and its rendered params; an Outcome when the step cannot run at all."""
    # An execution's inputs and trigger (a webhook's payload may be large) load only when an
    # expression reads them.
    step = (
        StepExecution.objects.select_related(
            "execution__version", "execution__workflow", "execution__team"
        )
        .defer("execution__inputs", "execution__trigger")
        .get(id=step_id)
    )
    execution = step.execution
    spec = orchestrator.spec_of(execution.version)
    step_spec = next(s for s in spec.steps if s.name == step.name)
    try:
        params = _params(step, step_spec)
        action = get_action(step_spec.action)
    except (ExpressionError, ActionFailed) as exc:
        return Outcome(StepStatus.FAILED, error=str(exc), retryable=False)
    deadline = orchestrator.workflow_deadline(execution, spec)
    return Prepared(action, params, step_spec.timeout, deadline)


def _params(step: StepExecution, step_spec: StepSpec) -> Any:
    if not find_expressions(step_spec.params):
        return step_spec.params
    # Only the steps' own rows are in the expressions' scope; a branch reads its one item in SQL,
    # never the fan-out's whole list.
    rows = list(
        StepExecution.objects.filter(execution_id=step.execution_id, fanout_index=None).defer(
            "items"
        )
    )
    item = None
    if step.fanout_index is not None:
        item = (
            StepExecution.objects.filter(
                execution_id=step.execution_id, name=step.name, fanout_index=None
            )
            .values_list(KeyTransform(str(step.fanout_index), "items"), flat=True)
            .get()
        )
    context = orchestrator.expression_context(
        step.execution, rows, item=item, index=step.fanout_index
    )
    return render(step_spec.params, context)


async def perform(prepared: Prepared, context: ActionContext) -> Outcome:
    """Run the action within the step's timeout and the workflow's deadline."""
    limits = [prepared.timeout] if prepared.timeout else []
    if prepared.deadline is not None:
        limits.append((prepared.deadline - timezone.now()).total_seconds())
    started = time.monotonic()
    try:
        async with asyncio.timeout(min(limits) if limits else None):
            output = await prepared.action(prepared.params, context)
    except TimeoutError:
        if prepared.timeout and time.monotonic() - started >= prepared.timeout:
            return Outcome(StepStatus.FAILED, error=f"timed out after {prepared.timeout:g}s")
        return Outcome(StepStatus.CANCELLED, error="workflow timed out", retryable=False)
    except ActionFailed as exc:
        return Outcome(StepStatus.FAILED, output=exc.output, error=str(exc))
    except Exception as exc:
        return Outcome(StepStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
    return Outcome(StepStatus.COMPLETED, output=output)


def _bounded(outcome: Outcome) -> Outcome:
    """Every later step of the execution reads a stored output, and the API returns it: one
    over limits.step_output_bytes is dropped and fails the step, naming the limit."""
    limit = settings.MANTLE.limits.step_output_bytes
    size = len(json.dumps(outcome.output, cls=DjangoJSONEncoder, ensure_ascii=False).encode())
    if size <= limit:
        return outcome
    error = f"the output is {size} bytes, over limits.step_output_bytes ({limit})"
    return Outcome(StepStatus.FAILED, error=error, retryable=False)


def settle(step_id: int, *, owner: str, attempt: int, outcome: Outcome) -> bool:
    """End the attempt held by `owner` (a retry when attempts are left: pending again, claimable
    after its backoff, holding no slot meanwhile), then advance the execution. False when the
    attempt is no longer this owner's."""
    with transaction.atomic():
        step = (
            StepExecution.objects.select_for_update(of=("self",))
            .select_related("execution__version")
            .defer("execution__inputs", "execution__trigger")
            .filter(id=step_id, status=StepStatus.RUNNING, lease_owner=owner, attempt=attempt)
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
    spec = orchestrator.spec_of(step.execution.version)
    retry = next(s for s in spec.steps if s.name == step.name).retry
    if step.attempt >= retry.max_attempts:
        return None
    if retry.backoff == "exponential":
        return min(BACKOFF_BASE * 2 ** (step.attempt - 1), BACKOFF_CAP)
    return BACKOFF_BASE
