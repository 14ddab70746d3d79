"""Which steps of a running execution start next, and when the execution ends.

`advance` is called after the execution starts, after every step attempt settles, and by the
reaper. It runs under a row lock on the execution, so concurrent calls (many workers finishing
branches at the same moment) are serialised: step rows are only created here, and a fan-out
step's `max_parallel` is decided by counting its live branch rows under that lock.

Rows: one per step (fanout_index null); a fan-out step also has one row per started branch
(fanout_index 0…n-1), created as branches become runnable: never more than `max_parallel`, nor
FANOUT_WINDOW, live at once, so a fan-out of any size costs bounded transactions and a bounded
claim queue. Its parent row holds the items and, once every branch is done, the outputs as a
list in item order. An advance loads the steps' own rows (without the items) and counts the
branches; it reads branch rows only to finish a fan-out.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Count, Q
from django.db.models.functions import Now
from django.utils import timezone

from engine import dispatch, specs
from executions.models import Execution, Status, StepExecution, StepStatus
from executions.services import claims, lifecycle
from teams.selectors import step_limit_ids, step_rates
from workflows.expressions import ExpressionError, evaluate_condition, render
from workflows.schema import StepSpec, WorkflowSpec

logger = logging.getLogger(__name__)

DONE = frozenset(
    {StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.CANCELLED}
)
LIVE = frozenset({StepStatus.PENDING, StepStatus.WAITING, StepStatus.RUNNING})
FANOUT_WINDOW = 1000  # branch rows of one fan-out pending or running at once, at most


def expression_context(
    execution: Execution, rows: list[StepExecution], *, item: Any = None, index: int | None = None
) -> dict[str, Any]:
    """What `{{ … }}` sees: inputs, finished steps (output, status, error), trigger, env, item,
    index, execution."""
    # An execution's inputs and trigger (a webhook's payload may be large) are often deferred:
    # both load here, in one query, only when an expression is about to be evaluated.
    deferred = execution.get_deferred_fields() & {"inputs", "trigger"}
    if deferred:
        execution.refresh_from_db(fields=sorted(deferred))
    return {
        "inputs": execution.inputs,
        "steps": {
            row.name: {"output": row.output, "status": row.status, "error": row.error or ""}
            for row in rows
            if row.fanout_index is None and row.status in DONE
        },
        "trigger": execution.trigger,
        "env": settings.MANTLE.env,
        "item": item,
        "index": index,
        "execution": {
            "id": str(execution.id),
            "workflow": execution.workflow.name,
            "team": execution.team.slug,
            "started_at": execution.started_at.isoformat() if execution.started_at else None,
        },
    }


def workflow_deadline(execution: Execution, spec: WorkflowSpec) -> Any:
    if spec.timeout is None or execution.started_at is None:
        return None
    return execution.started_at + timedelta(seconds=spec.timeout)


@dataclass(frozen=True)
class _Branches:
    """A fan-out's unfinished branch rows, counted."""

    live: int = 0
    failed: int = 0


@dataclass
class _StepScopes:
    """The step-scope limits and rates of the teams of one advance, by name (docs/limits.md,
    Step scope): each team's read once, when a step of it first lists one, for every execution
    of the advance (they were read once per execution: a round trip each, under the advance's
    locks)."""

    limit_ids: dict[int, dict[str, int]] = field(default_factory=dict)
    rates: dict[int, dict[str, tuple[int, int, bool]]] = field(default_factory=dict)

    def limits_of(self, team_id: int) -> dict[str, int]:
        if team_id not in self.limit_ids:
            self.limit_ids[team_id] = step_limit_ids(team_id=team_id)
        return self.limit_ids[team_id]

    def rates_of(self, team_id: int) -> dict[str, tuple[int, int, bool]]:
        if team_id not in self.rates:
            self.rates[team_id] = step_rates(team_id=team_id)
        return self.rates[team_id]


@dataclass
class _Plan:
    execution: Execution
    spec: WorkflowSpec
    # The steps' own rows (fanout_index null), without a fan-out's items: a branch reads its
    # item itself, and here only their number matters (`item_counts`, per fan-out step).
    rows: list[StepExecution]
    item_counts: dict[str, int]
    branches: dict[str, _Branches]
    # Step rows to insert (by advance_many, in one statement with other executions').
    created: list[StepExecution]
    scopes: _StepScopes

    def parent(self, name: str) -> StepExecution | None:
        return next((r for r in self.rows if r.name == name), None)

    def runnable(self, step: StepSpec) -> dict[str, Any]:
        """The fields of a row of `step` ready to run: pending, or waiting with its step-scope
        limits (docs/limits.md, Step scope), resolved by name to the team's own or else a
        global limit; failed when one of them no longer exists."""
        if not step.limits and step.rate is None:
            return {"status": StepStatus.PENDING}
        limit_ids = self.scopes.limits_of(self.execution.team_id)
        missing = [limit.name for limit in step.limits if limit.name not in limit_ids]
        if missing:
            return _failed(f"unknown named limit {missing[0]!r} (deleted since applied)")
        fields = {
            "status": StepStatus.WAITING,
            "limit_ids": [limit_ids[limit.name] for limit in step.limits],
            "limit_units": [limit.units for limit in step.limits],
        }
        if step.rate is None:
            return fields
        rate = self.scopes.rates_of(self.execution.team_id).get(step.rate.name)
        if rate is None:
            return _failed(f"unknown named rate {step.rate.name!r} (deleted since applied)")
        rate_id, _, per_key = rate
        key = ""
        if per_key and step.rate.key is not None:
            context = expression_context(self.execution, self.rows)
            try:
                key = str(render(step.rate.key, context))[:200]
            except ExpressionError as exc:
                return _failed(f"rate_limit.key: {exc}")
        return {**fields, "rate_id": rate_id, "rate_units": step.rate.units, "rate_key": key}

    def create(self, step: StepSpec, **fields: Any) -> None:
        """A row that is not written again in this advance: inserted with the batch."""
        row = StepExecution(execution=self.execution, name=step.name, **fields)
        self.created.append(row)
        self.rows.append(row)

    def create_fanout(self, step: StepSpec, items: list[Any]) -> StepExecution:
        """A fan-out's own row, inserted now: its branches are created (or it completes) next."""
        row = StepExecution.objects.create(
            execution=self.execution,
            name=step.name,
            status=StepStatus.RUNNING,
            items=items,
            started_at=Now(),
        )
        self.item_counts[step.name] = len(items)
        self.rows.append(row)
        return row

    def fail(self, row: StepExecution, error: str, **fields: Any) -> None:
        row.status, row.error = StepStatus.FAILED, error
        for key, value in fields.items():
            setattr(row, key, value)
        row.completed_at = timezone.now()
        row.save(update_fields=["status", "error", "completed_at", *fields])


def engine_error(exc: BaseException) -> str:
    """The error recorded when the engine itself raised while running an execution."""
    return f"engine error: {type(exc).__name__}: {exc}"


def _failed(error: str) -> dict[str, Any]:
    return {"status": StepStatus.FAILED, "error": error, "completed_at": Now()}


def advance(execution_id: uuid.UUID) -> None:
    advance_many([execution_id])


def executions_start(limit: int, *, owner: str, room: int) -> tuple[int, list[dispatch.Claim]]:
    """Claim up to `limit` pending executions (pending → running), create their first steps and
    claim up to `room` of those for `owner`, in one transaction: how many it started, and the
    claims. (The steps it leaves are claimed by any worker.)"""
    with transaction.atomic():
        execution_ids = dispatch.executions_claim(limit)
        # An execution has no step rows before it runs (admission and promotion create it
        # pending, nothing moves it back), but those a replay reuses (services/replay.py).
        advance_many(execution_ids, started=True)
        if not execution_ids or room <= 0:
            return len(execution_ids), []
        return len(execution_ids), dispatch.steps_claim_started(owner, execution_ids, room)


def advance_many(execution_ids: Collection[uuid.UUID], *, started: bool = False) -> None:
    """Advance each execution, in one transaction (the caller's, when it has one). The rows are
    locked in id order, so two workers advancing overlapping sets never deadlock. The steps they
    create are inserted in one statement, then the executions that ended are ended in one.
    `started`: they have just started in this transaction, so they have no step rows yet but
    those a replay reuses."""
    if not execution_ids:
        return
    with transaction.atomic(savepoint=False):
        advance_locked(claims.executions_lock(execution_ids), started=started)


def advance_locked(executions: list[Execution], *, started: bool = False) -> None:
    """`advance_many` for executions the caller's transaction locked (claims.executions_lock)."""
    if not executions:
        return
    with transaction.atomic(savepoint=False):
        running = [execution for execution in executions if execution.status == Status.RUNNING]
        # Just started, an execution has no step rows but a replay's reused ones.
        with_rows = [e.id for e in running if not started or e.reused_steps]
        rows = claims.step_rows(with_rows)
        created: list[StepExecution] = []
        scopes = _StepScopes()
        finishes = []
        for execution in running:
            planned = len(created)
            try:
                outcome = _advance(execution, rows.get(execution.id, []), created, scopes)
            except DatabaseError:
                raise  # the transaction is lost: the caller's retry, not this execution's fault
            except Exception as exc:
                # A bug or an overflow in one execution fails that execution, never the batch nor
                # the worker (docs/hostile-input.md, No poison execution). What its plan wrote
                # is of a failed execution: ending it cancels those steps.
                logger.exception("advancing execution %s failed", execution.id)
                del created[planned:]
                outcome = Status.FAILED, engine_error(exc)
            if outcome is not None:
                finishes.append((execution, *outcome))
        # Before the ends: ending a failed execution cancels its pending steps, these included.
        claims.steps_insert(created)
        lifecycle.executions_finish_locked(finishes)


def _advance(
    execution: Execution,
    rows: list[StepExecution],
    created: list[StepExecution],
    scopes: _StepScopes,
) -> tuple[str, str] | None:
    """Plan the execution's next steps (appended to `created`, for its caller to insert); its
    terminal (status, error) when it ends. `scopes`: its team's step-scope limits and rates, as
    read for the whole advance."""
    spec = specs.spec_by_id(execution.version_id)
    deadline = workflow_deadline(execution, spec)
    if deadline is not None and timezone.now() >= deadline:
        return Status.TIMED_OUT, f"workflow timed out after {spec.timeout:g}s"
    fans_out = any(step.for_each is not None for step in spec.steps)
    item_counts = {row.name: getattr(row, "item_count", None) for row in rows}
    plan = _Plan(
        execution,
        spec,
        rows,
        {name: count for name, count in item_counts.items() if count is not None},
        # Branch rows exist only under their fan-out's own row, one of `rows`.
        _branch_counts(execution) if fans_out and rows else {},
        created,
        scopes,
    )
    for step in spec.steps:
        _advance_step(plan, step)
    return _outcome(plan)


def _branch_counts(execution: Execution) -> dict[str, _Branches]:
    """Live and failed branches per fan-out step: from the partial index `step_unfinished`,
    whatever the number of finished branches."""
    counts = (
        StepExecution.objects.filter(
            execution=execution,
            fanout_index__isnull=False,
            status__in=[*LIVE, StepStatus.FAILED],
        )
        .values("name")
        .annotate(
            live=Count("id", filter=Q(status__in=LIVE)),
            failed=Count("id", filter=Q(status=StepStatus.FAILED)),
        )
    )
    return {row["name"]: _Branches(row["live"], row["failed"]) for row in counts}


def _advance_step(plan: _Plan, step: StepSpec) -> None:
    parent = plan.parent(step.name)
    if parent is None:
        _start_if_ready(plan, step)
    elif step.for_each is not None and parent.status == StepStatus.RUNNING:
        _advance_fanout(plan, step, parent)


def _start_if_ready(plan: _Plan, step: StepSpec) -> None:
    dependencies = [
        dep for name in step.depends_on if (dep := plan.parent(name)) and dep.status in DONE
    ]
    if len(dependencies) < len(step.depends_on):
        return
    if any(dep.status == StepStatus.FAILED and not _continues(plan, dep) for dep in dependencies):
        return  # the execution is failing; this step never starts
    # A skipped dependency counts as resolved (upstream's rule): dependants run and see it
    # with status "skipped"; a cancelled one (the execution is ending) skips them.
    if any(dep.status == StepStatus.CANCELLED for dep in dependencies):
        plan.create(step, status=StepStatus.SKIPPED, completed_at=Now())
        return
    if step.if_ is None and step.for_each is None:
        plan.create(step, **plan.runnable(step))
        return
    context = expression_context(plan.execution, plan.rows)
    try:
        if step.if_ is not None and not evaluate_condition(step.if_, context):
            plan.create(step, status=StepStatus.SKIPPED, completed_at=Now())
            return
        if step.for_each is None:
            plan.create(step, **plan.runnable(step))
            return
        items = render(step.for_each, context)
    except ExpressionError as exc:
        plan.create(step, status=StepStatus.FAILED, error=str(exc), completed_at=Now())
        return
    if not isinstance(items, list):
        error = f"for_each must give a list, got {type(items).__name__}"
        plan.create(step, status=StepStatus.FAILED, error=error, completed_at=Now())
        return
    limit = settings.MANTLE.limits.fanout_items
    if len(items) > limit:
        error = f"for_each gave {len(items)} items, over limits.fanout_items ({limit})"
        plan.create(step, status=StepStatus.FAILED, error=error, completed_at=Now())
        return
    _advance_fanout(plan, step, plan.create_fanout(step, items))


def _advance_fanout(plan: _Plan, step: StepSpec, parent: StepExecution) -> None:
    counts = plan.branches.get(step.name, _Branches())
    created = _created(parent)
    if counts.failed and not step.continue_on_error:
        # A failed branch fails the step at once; running siblings see the execution end.
        plan.fail(parent, _branch_errors(parent), output=_outputs(parent))
        return
    room = min(plan.item_counts[step.name] - created, FANOUT_WINDOW - counts.live)
    if step.max_parallel:
        room = min(room, step.max_parallel - counts.live)
    if room > 0:
        # Each branch is a step: it holds the step's limits for its own run.
        fields = plan.runnable(step)
        StepExecution.objects.bulk_create(
            StepExecution(execution=plan.execution, name=step.name, fanout_index=index, **fields)
            for index in range(created, created + room)
        )
        return
    if counts.live or created < plan.item_counts[step.name]:
        return
    if counts.failed:
        plan.fail(parent, _branch_errors(parent), output=_outputs(parent))
    else:
        parent.status = StepStatus.COMPLETED
        parent.output = _outputs(parent)
        parent.completed_at = timezone.now()
        parent.save(update_fields=["status", "output", "completed_at"])


def _branch_rows(parent: StepExecution) -> Any:
    return StepExecution.objects.filter(
        execution_id=parent.execution_id, name=parent.name, fanout_index__isnull=False
    )


def _created(parent: StepExecution) -> int:
    """Branches are created in index order, so the next index is the highest one plus one."""
    last = _branch_rows(parent).order_by("-fanout_index").values_list("fanout_index")[:1]
    return next((index + 1 for (index,) in last), 0)


def _outputs(parent: StepExecution) -> list[Any]:
    return list(_branch_rows(parent).order_by("fanout_index").values_list("output", flat=True))


def _branch_errors(parent: StepExecution) -> str:
    failed = _branch_rows(parent).filter(status=StepStatus.FAILED).order_by("fanout_index")
    return "; ".join(
        f"[{index}] {error}" for index, error in failed.values_list("fanout_index", "error")
    )


def _continues(plan: _Plan, row: StepExecution) -> bool:
    return next(s for s in plan.spec.steps if s.name == row.name).continue_on_error


def _outcome(plan: _Plan) -> tuple[str, str] | None:
    """The execution's terminal status once nothing more can run, else None."""
    parents = [plan.parent(step.name) for step in plan.spec.steps]
    for row in parents:
        if row is not None and row.status == StepStatus.FAILED and not _continues(plan, row):
            return Status.FAILED, f"step {row.name!r} failed: {row.error}"
    if any(row is None or row.status not in DONE for row in parents):
        return None
    return Status.COMPLETED, ""
