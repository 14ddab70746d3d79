"""Which steps of a running execution start next, and when the execution ends.

`advance` is called after the execution starts, after every step attempt settles, and by the
reaper. It runs under a row lock on the execution, so concurrent calls (many workers finishing
branches at the same moment) are serialised: step rows are only created here, and a fan-out
step's `max_parallel` is decided by counting its live branch rows under that lock.

Rows: one per step (fanout_index null); a fan-out step also has one row per started branch
(fanout_index 0…n-1), created lazily as the cap allows; its parent row holds the items and, once
every branch is done, the outputs as a list in item order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from executions.models import Execution, Status, StepExecution, StepStatus
from executions.services import lifecycle
from workflows.expressions import ExpressionError, evaluate_condition, render
from workflows.models import WorkflowVersion
from workflows.schema import StepSpec, WorkflowSpec

DONE = frozenset(
    {StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.CANCELLED}
)
LIVE = frozenset({StepStatus.PENDING, StepStatus.RUNNING})


_SPECS: dict[int, WorkflowSpec] = {}


def spec_of(version: WorkflowVersion) -> WorkflowSpec:
    """A version never changes, so its parsed spec is kept (per process, bounded)."""
    spec = _SPECS.get(version.id)
    if spec is None:
        if len(_SPECS) >= 1024:
            _SPECS.clear()
        spec = _SPECS[version.id] = WorkflowSpec.from_dict(version.spec)
    return spec


def expression_context(
    execution: Execution, rows: list[StepExecution], *, item: Any = None, index: int | None = None
) -> dict[str, Any]:
    """What `{{ … }}` sees: inputs, finished steps' outputs, trigger, item, index, execution."""
    return {
        "inputs": execution.inputs,
        "steps": {
            row.name: {"output": row.output, "status": row.status}
            for row in rows
            if row.fanout_index is None and row.status in DONE
        },
        "trigger": execution.trigger,
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


@dataclass
class _Plan:
    execution: Execution
    spec: WorkflowSpec
    rows: list[StepExecution]

    def parent(self, name: str) -> StepExecution | None:
        return next((r for r in self.rows if r.name == name and r.fanout_index is None), None)

    def branches(self, name: str) -> list[StepExecution]:
        return [r for r in self.rows if r.name == name and r.fanout_index is not None]

    def create(self, step: StepSpec, **fields: Any) -> StepExecution:
        row = StepExecution.objects.create(execution=self.execution, name=step.name, **fields)
        self.rows.append(row)
        return row

    def fail(self, row: StepExecution, error: str, **fields: Any) -> None:
        row.status, row.error = StepStatus.FAILED, error
        for key, value in fields.items():
            setattr(row, key, value)
        row.completed_at = timezone.now()
        row.save()


def advance(execution_id: uuid.UUID) -> None:
    with transaction.atomic():
        execution = (
            Execution.objects.select_for_update(of=("self",))
            .select_related("version", "workflow", "team")
            .filter(id=execution_id)
            .first()
        )
        if execution is None or execution.status != Status.RUNNING:
            return
        spec = spec_of(execution.version)
        deadline = workflow_deadline(execution, spec)
        if deadline is not None and timezone.now() >= deadline:
            lifecycle.execution_finish(
                execution_id,
                status=Status.TIMED_OUT,
                error=f"workflow timed out after {spec.timeout:g}s",
            )
            return
        plan = _Plan(execution, spec, list(StepExecution.objects.filter(execution=execution)))
        for step in spec.steps:
            _advance_step(plan, step)
        outcome = _outcome(plan)
        if outcome is not None:
            lifecycle.execution_finish(execution_id, status=outcome[0], error=outcome[1])


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
    if any(dep.status in (StepStatus.SKIPPED, StepStatus.CANCELLED) for dep in dependencies):
        plan.create(step, status=StepStatus.SKIPPED, completed_at=Now())
        return
    context = expression_context(plan.execution, plan.rows)
    try:
        if step.if_ is not None and not evaluate_condition(step.if_, context):
            plan.create(step, status=StepStatus.SKIPPED, completed_at=Now())
            return
        if step.for_each is None:
            plan.create(step, status=StepStatus.PENDING)
            return
        items = render(step.for_each, context)
    except ExpressionError as exc:
        plan.create(step, status=StepStatus.FAILED, error=str(exc), completed_at=Now())
        return
    if not isinstance(items, list):
        error = f"for_each must give a list, got {type(items).__name__}"
        plan.create(step, status=StepStatus.FAILED, error=error, completed_at=Now())
        return
    parent = plan.create(step, status=StepStatus.RUNNING, items=items, started_at=Now())
    _advance_fanout(plan, step, parent)


def _advance_fanout(plan: _Plan, step: StepSpec, parent: StepExecution) -> None:
    branches = plan.branches(step.name)
    live = sum(1 for branch in branches if branch.status in LIVE)
    failed = any(branch.status == StepStatus.FAILED for branch in branches)
    total = len(parent.items or [])
    room = total - len(branches)
    if step.max_parallel:
        room = min(room, step.max_parallel - live)
    if failed and not step.continue_on_error:
        # A failed branch fails the step at once; running siblings see the execution end.
        plan.fail(parent, _branch_errors(branches), output=_outputs(branches))
        return
    for index in range(len(branches), len(branches) + max(room, 0)):
        plan.create(step, fanout_index=index, status=StepStatus.PENDING)
    branches = plan.branches(step.name)
    if any(branch.status in LIVE for branch in branches):
        return
    if len(branches) < total:
        return
    if failed:
        plan.fail(parent, _branch_errors(branches), output=_outputs(branches))
    else:
        parent.status = StepStatus.COMPLETED
        parent.output = _outputs(branches)
        parent.completed_at = timezone.now()
        parent.save()


def _outputs(branches: list[StepExecution]) -> list[Any]:
    return [b.output for b in sorted(branches, key=lambda b: b.fanout_index or 0)]


def _branch_errors(branches: list[StepExecution]) -> str:
    return "; ".join(
        f"[{b.fanout_index}] {b.error}" for b in branches if b.status == StepStatus.FAILED
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
