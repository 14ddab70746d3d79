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

    # The transition is committed whatever happens next: a promotion that fails now (the team's
    # lock busy past lock_timeout, the database gone) is logged and left to the backup poller,
    # never turned into an error for the caller that made the transition.
    transaction.on_commit(lambda: metrics.count_terminal(**labels), robust=True)
    if not _promotion_pending(team_id):
        transaction.on_commit(_Promote(team_id), robust=True)


class _Promote:
    """The team's promotion after commit. One promotes as many as fit, so a transaction that
    ends many executions of one team (the engine settles in batches) promotes it once."""

    def __init__(self, team_id: int) -> None:
        self.team_id = team_id
        # Django names a robust callback that raised (a busy team lock) by its __qualname__.
        self.__qualname__ = f"promote team {team_id}"

    def __call__(self) -> None:
        promotion.queue_promote_after_terminal(self.team_id)


def _promotion_pending(team_id: int) -> bool:
    """Whether this transaction already promotes the team after commit, from a callback
    registered at this very savepoint depth (one the engine's batch registered for an earlier
    execution), so nothing can drop it and keep the caller's transition."""
    connection = transaction.get_connection()
    here = set(connection.savepoint_ids)
    return any(
        isinstance(callback, _Promote) and callback.team_id == team_id and savepoints == here
        for savepoints, callback, _robust in connection.run_on_commit
    )


@receiver(limit_loosened, dispatch_uid="promote_after_limit_loosened")
def promote_after_limit_loosened(sender: object, team_id: int, **kwargs: Any) -> None:
    """A raised or cleared limit (team or workflow) promotes what now fits, after its commit."""
    transaction.on_commit(lambda: promotion.queue_promote(team_id, trigger="limit_change"))
