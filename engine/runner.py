"""One attempt of one step: prepare it, run its action, settle it, move the execution on.

The step worker (worker.py) claims attempts (pending → running, with their lease owner and
attempt number: engine.dispatch.Claim), prepares each (`prepare_kept` on the event loop when its
params read no expression, else `prepare` on a database thread), runs its action (`perform`),
and settles finished attempts in batches (`settle`: one transaction ends them and advances their
executions). Every write of an attempt is conditional on (id, running, owner, attempt): once the
reaper has taken an expired attempt over, the old owner's writes change nothing, even when the
new attempt is claimed by the same process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, connection, transaction
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from engine import dispatch, orchestrator, specs
from engine.actions import Action, ActionContext, ActionFailed, get_action
from executions.models import Execution, StepExecution, StepStatus
from executions.services import claims
from workflows.expressions import ExpressionError, find_expressions, render
from workflows.schema import StepSpec, WorkflowSpec

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class Settlement:
    """How an attempt ended, to be written on behalf of `owner`."""

    claim: dispatch.Claim
    owner: str
    outcome: Outcome


def prepare_kept(claim: dispatch.Claim) -> Prepared | Outcome | None:
    """`prepare` without a query, or None when that needs one: the spec is not yet read in this
    process, or the params read an expression."""
    spec = specs.spec_kept(claim.version_id)
    if spec is None:
        return None
    step_spec = _step_spec(spec, claim)
    if find_expressions(step_spec.params):
        return None
    return _prepared(claim, spec, step_spec, step_spec.params)


def prepare(claim: dispatch.Claim) -> Prepared | Outcome:
    """The action and its rendered params; an Outcome when the step cannot run at all."""
    spec = specs.spec_by_id(claim.version_id)
    step_spec = _step_spec(spec, claim)
    try:
        params = _params(claim, step_spec)
    except ExpressionError as exc:
        return Outcome(StepStatus.FAILED, error=str(exc), retryable=False)
    return _prepared(claim, spec, step_spec, params)


def _step_spec(spec: WorkflowSpec, claim: dispatch.Claim) -> StepSpec:
    return next(s for s in spec.steps if s.name == claim.name)


def _prepared(
    claim: dispatch.Claim, spec: WorkflowSpec, step_spec: StepSpec, params: Any
) -> Prepared | Outcome:
    try:
        action = get_action(step_spec.action)
    except ActionFailed as exc:
        return Outcome(StepStatus.FAILED, error=str(exc), retryable=False)
    deadline = None
    if spec.timeout is not None and claim.started_at is not None:
        deadline = claim.started_at + timedelta(seconds=spec.timeout)
    return Prepared(action, params, step_spec.timeout, deadline)


def _params(claim: dispatch.Claim, step_spec: StepSpec) -> Any:
    if not find_expressions(step_spec.params):
        return step_spec.params
    # An execution's inputs and trigger (a webhook's payload may be large) load only when an
    # expression reads them. Only the steps' own rows are in the expressions' scope; a branch
    # reads its one item in SQL, never the fan-out's whole list.
    execution = (
        Execution.objects.select_related("workflow", "team")
        .defer("inputs", "trigger")
        .get(id=claim.execution_id)
    )
    rows = list(
        StepExecution.objects.filter(execution_id=claim.execution_id, fanout_index=None).defer(
            "items"
        )
    )
    item = None
    if claim.fanout_index is not None:
        item = (
            StepExecution.objects.filter(
                execution_id=claim.execution_id, name=claim.name, fanout_index=None
            )
            .values_list(KeyTransform(str(claim.fanout_index), "items"), flat=True)
            .get()
        )
    context = orchestrator.expression_context(execution, rows, item=item, index=claim.fanout_index)
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
        return Outcome(
            StepStatus.FAILED, output=exc.output, error=str(exc), retryable=exc.retryable
        )
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except BaseException as exc:
        # SystemExit or any other BaseException an action raises fails its step: asyncio would
        # carry it out of the event loop and end the worker (docs/hostile-input.md).
        return Outcome(StepStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
    return Outcome(StepStatus.COMPLETED, output=output)


def _stored(outcome: Outcome) -> tuple[Outcome, str | None]:
    """The outcome as stored, with its output as JSON. Every later step of the execution reads a
    stored output, and the API returns it: one over limits.step_output_bytes is dropped and
    fails the step, naming the limit."""
    if outcome.output is None:
        return outcome, None
    limit = settings.MANTLE.limits.step_output_bytes
    output = json.dumps(outcome.output, cls=DjangoJSONEncoder, ensure_ascii=False)
    size = len(output.encode())
    if size <= limit:
        return outcome, output
    error = f"the output is {size} bytes, over limits.step_output_bytes ({limit})"
    return Outcome(StepStatus.FAILED, error=error, retryable=False), None


def settle(settlements: list[Settlement]) -> set[int]:
    """End the attempts, each fenced by its owner (a retry when attempts are left: pending again,
    claimable after its backoff, holding no slot meanwhile), and advance their executions, all
    in one transaction. Returns the ids of the steps settled; the others were no longer their
    owner's."""
    return _settle_and_advance(settlements, _settle_rows(settlements))


def settle_freeing(settlements: list[Settlement]) -> tuple[set[int], set[uuid.UUID]]:
    """`settle` for attempts holding step-scope limits, whose units the caller hands on: when
    every attempt completed, they end in a statement of their own and their executions are
    returned, for the caller to advance after its hand-off claim (docs/limits.md, Step scope);
    otherwise as `settle` (nothing left to advance). Only a completed attempt may wait for its
    advance: it never ends its execution while other steps are live, whereas a failed one may,
    and that advance cancels the execution's waiting steps before a claim can take them. A
    process lost between the end and the advance leaves the execution to the reaper's pass for
    stalled executions (engine/reaper.py). The end's commit does not wait for the disk: the
    caller's hand-off claim, right after it, flushes it with its own (steps_settle in
    executions/sql/engine.sql)."""
    rows = _settle_rows(settlements)
    if any(row.status != StepStatus.COMPLETED for row in rows):
        return _settle_and_advance(settlements, rows), set()
    ended = claims.attempts_settle(rows, flushed=False)
    return set(ended), set(ended.values())


def advance(execution_ids: set[uuid.UUID]) -> None:
    """Advance the executions `settle_freeing` left (after the hand-off claim); one by one when
    the batch fails, so that one execution's failure holds up no other (the reaper's pass for
    stalled executions retries what still fails)."""
    try:
        orchestrator.advance_many(execution_ids)
    except DatabaseError:
        connection.close()
        for execution_id in execution_ids:
            try:
                orchestrator.advance_many([execution_id])
            except DatabaseError:
                connection.close()
                logger.exception("advancing execution %s failed; the reaper retries", execution_id)


def _settle_and_advance(settlements: list[Settlement], rows: list[claims.Settle]) -> set[int]:
    with transaction.atomic():
        # The executions' rows are locked before their steps' are written: the order of a
        # cancel, which ends the steps of the execution it holds (docs/architecture.md, The lock
        # order). Steps first, a settle waiting for the row of an execution being cancelled could
        # hold a step the cancel waits for: a deadlock.
        executions = claims.executions_lock(
            {settlement.claim.execution_id for settlement in settlements}
        )
        settled = claims.attempts_settle(rows)
        advanced = set(settled.values())
        orchestrator.advance_locked([e for e in executions if e.id in advanced])
    return set(settled)


def _settle_rows(settlements: list[Settlement]) -> list[claims.Settle]:
    rows = []
    for settlement in settlements:
        outcome, output = _stored(settlement.outcome)
        claim = settlement.claim
        delay = _retry_delay(claim, outcome)
        rows.append(
            claims.Settle(
                id=claim.id,
                attempt=claim.attempt,
                owner=settlement.owner,
                status=outcome.status,
                output=output,
                error=outcome.error,
                delay=delay,
            )
        )
    return rows


def _retry_delay(claim: dispatch.Claim, outcome: Outcome) -> float | None:
    if outcome.status != StepStatus.FAILED or not outcome.retryable:
        return None
    retry = _step_spec(specs.spec_by_id(claim.version_id), claim).retry
    if claim.attempt >= retry.max_attempts:
        return None
    if retry.backoff == "exponential":
        return min(BACKOFF_BASE * 2 ** (claim.attempt - 1), BACKOFF_CAP)
    return BACKOFF_BASE


def steps_claim(
    claim: Callable[[str, int], list[dispatch.Claim]], owner: str, limit: int
) -> list[dispatch.Claim]:
    """Claim steps, and read the specs of versions this process has not seen (once each)."""
    if limit <= 0:
        return []
    claims = claim(owner, limit)
    for version_id in {claim.version_id for claim in claims}:
        specs.spec_by_id(version_id)
    return claims


def settle_then_claim(
    settlements: list[Settlement], owner: str, room: int
) -> tuple[set[int], list[dispatch.Claim], set[uuid.UUID]]:
    """Settle (settle_freeing: completed attempts end in a statement of their own, their
    executions are left to advance), then claim the waiting limited steps that now fit (in a
    transaction of its own: the claim takes its limits' locks holding nothing, docs/limits.md,
    Step scope): the steps settled, the claims, and the executions still to advance."""
    settled, unadvanced = settle_freeing(settlements)
    try:
        return settled, steps_claim(dispatch.steps_claim_limited, owner, room), unadvanced
    except Exception:
        # The settle committed: its NOTIFY wakes the claimer, which claims what this could not,
        # and the caller still advances what it ended.
        connection.close()
        logger.exception("claiming after a settle failed; the claimer claims instead")
        return settled, [], unadvanced
