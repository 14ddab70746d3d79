"""What triggers promotion: every terminal transition, by any path that saves the row, and every
loosened limit (teams.signals.limit_loosened). Both promote after commit."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from executions import metrics
from executions.models import TERMINAL, Execution
from executions.services import promotion
from teams.signals import limit_loosened


@receiver(post_save, sender=Execution, dispatch_uid="promote_after_terminal")
def promote_after_terminal(
    sender: type[Execution], instance: Execution, update_fields: Any, **kwargs: Any
) -> None:
    if instance.status not in TERMINAL:
        return
    if update_fields is not None and "status" not in update_fields:
        return
    team_id = instance.team_id
    labels = {
        "team": instance.team.slug,
        "workflow": instance.workflow.name,
        "status": instance.status,
    }

    def after_commit() -> None:
        metrics.count_terminal(**labels)
        promotion.queue_promote(team_id, trigger="completion")

    # The transition is committed whatever happens next: a promotion that fails now (the team's
    # lock busy past lock_timeout, the database gone) is logged and left to the backup poller,
    # never turned into an error for the caller that made the transition.
    transaction.on_commit(after_commit, robust=True)


@receiver(limit_loosened, dispatch_uid="promote_after_limit_loosened")
def promote_after_limit_loosened(sender: object, team_id: int, **kwargs: Any) -> None:
    """A raised or cleared limit (team or workflow) promotes what now fits, after its commit."""
    transaction.on_commit(lambda: promotion.queue_promote(team_id, trigger="limit_change"))
