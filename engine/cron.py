"""Cron triggers: each tick of a workflow's `- type: cron` schedule creates one execution
through admission, so it queues or is rejected like any other.

At most once per tick across schedulers: the tick's idempotency key
(`cron:<workflow>:<trigger>:<time>`) is unique per team, so a second scheduler admitting the
same tick fails on the constraint and writes nothing. Ticks missed while no scheduler ran are
not caught up; only the latest tick in the window is admitted.

A tick of a paused workflow (its own pause, its team's, or a named limit's it lists) is skipped
and counted (`mantle_cron_ticks_skipped_total`), unless the workflow says `on_pause: queue`:
then it is admitted, and queued by the pause (docs/operations.md, Pausing during an incident).
"""

from __future__ import annotations

import logging
from datetime import datetime

from croniter import croniter
from django.db import IntegrityError

from executions import metrics
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from teams.models import NamedLimit
from workflows.models import OnPause, WorkflowDefinition
from workflows.schema import InvalidInputs

logger = logging.getLogger(__name__)


def admit_due(*, since: datetime, until: datetime) -> int:
    """Admit the cron ticks in (since, until]; return how many executions were created."""
    created = 0
    workflows = WorkflowDefinition.objects.select_related("team", "current_version").filter(
        current_version__spec__triggers__contains=[{"type": "cron"}]
    )
    for workflow in workflows:
        for index, trigger in enumerate(workflow.applied_version.spec["triggers"]):
            if trigger["type"] != "cron":
                continue
            tick = latest_tick(trigger["schedule"], since=since, until=until)
            if tick is None:
                continue
            if _skipped_for_pause(workflow):
                logger.info("cron tick of %s at %s skipped: paused", workflow, tick.isoformat())
                metrics.count_cron_skip(team=workflow.team.slug, workflow=workflow.name)
            elif _admit_tick(workflow, index, trigger["schedule"], tick):
                created += 1
    return created


def _skipped_for_pause(workflow: WorkflowDefinition) -> bool:
    version = workflow.applied_version
    if version.on_pause == OnPause.QUEUE:
        return False
    return (
        workflow.paused_at is not None
        or workflow.team.paused_at is not None
        or NamedLimit.objects.filter(
            team_id=workflow.team_id, name__in=version.limits, paused_at__isnull=False
        ).exists()
    )


def latest_tick(schedule: str, *, since: datetime, until: datetime) -> datetime | None:
    """The last tick of `schedule` in (since, until], or None."""
    ticks = croniter(schedule, since)
    latest = None
    while (tick := ticks.get_next(datetime)) <= until:
        latest = tick
    return latest


def _admit_tick(workflow: WorkflowDefinition, index: int, schedule: str, tick: datetime) -> bool:
    trigger = {"type": "cron", "schedule": schedule, "scheduled_at": tick.isoformat()}
    try:
        execution_admit(
            team=workflow.team,
            workflow=workflow,
            trigger=trigger,
            idempotency_key=f"cron:{workflow.id}:{index}:{tick.isoformat()}",
        )
    except IntegrityError:
        return False  # another scheduler admitted this tick
    except ConcurrencyLimitExceeded as exc:
        logger.warning("cron tick of %s rejected: %s", workflow, exc)
        return False
    except InvalidInputs as exc:
        logger.warning("cron tick of %s not admitted: %s", workflow, exc)
        return False
    return True
