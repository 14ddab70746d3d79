"""The entries to promotion. `promote_after_finish` is the one entry from a terminal transition:
every one, by whatever path, goes through executions.services.lifecycle, whose write sends
`executions_finished`. A loosened limit (teams.signals.limit_loosened) is the other trigger.
Both promote after commit."""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from django.db import transaction
from django.dispatch import receiver

from executions import metrics
from executions.models import Execution
from executions.services import promotion
from executions.services.lifecycle import executions_finished
from teams.signals import limit_loosened

logger = logging.getLogger(__name__)


@receiver(executions_finished, dispatch_uid="promote_after_finish")
def promote_after_finish(
    sender: type[Execution], executions: list[Execution], **kwargs: Any
) -> None:
    """Count the ended executions and promote each of their teams, after commit."""
    labels = [
        {
            "team": execution.team.slug,
            "workflow": execution.workflow.name,
            "status": execution.status,
        }
        for execution in executions
    ]
    # The transition is committed whatever happens next: a metric or a promotion that fails now
    # (the team's lock busy past lock_timeout, the database gone) is logged and left to the
    # backup poller, never turned into an error for the caller that made the transition.
    transaction.on_commit(lambda: _count_terminal(labels), robust=True)
    for team_id in sorted({execution.team_id for execution in executions}):
        if not _promotion_pending(team_id):
            _promote_after_commit(team_id)


def _count_terminal(labels: list[dict[str, str]]) -> None:
    for label in labels:
        metrics.count_terminal(**label)


class _Promote:
    """The team's promotion after commit. One promotes as many as fit, so a transaction that
    ends many executions of one team (the engine settles in batches) promotes it once."""

    def __init__(self, team_id: int) -> None:
        self.team_id = team_id
        self.called = False

    def __call__(self) -> None:
        self.called = True
        try:
            promotion.queue_promote_after_terminal(self.team_id)
        except Exception:
            logger.exception("promoting team %s after a completion failed", self.team_id)


# Per thread (a connection's transaction is its thread's): each team's _Promote registered with
# transaction.on_commit and not yet called, held weakly. Django holds a registered callback until
# it runs, and lets go of it when the savepoint or transaction that registered it rolls back;
# nothing else holds one. So one alive here and not called will run after this transaction
# commits, and nothing can drop it and keep the transition at hand: it was registered in this
# savepoint, in one enclosing it, or in one already released into it.
_registered = threading.local()


def _promotion_pending(team_id: int) -> bool:
    pending: weakref.WeakValueDictionary[int, _Promote] | None = getattr(
        _registered, "promotions", None
    )
    promote = None if pending is None else pending.get(team_id)
    return promote is not None and not promote.called


def _promote_after_commit(team_id: int) -> None:
    promote = _Promote(team_id)
    transaction.on_commit(promote)
    if not hasattr(_registered, "promotions"):
        _registered.promotions = weakref.WeakValueDictionary()
    _registered.promotions[team_id] = promote


@receiver(limit_loosened, dispatch_uid="promote_after_limit_loosened")
def promote_after_limit_loosened(sender: object, team_id: int, **kwargs: Any) -> None:
    """A raised or cleared limit (team or workflow) promotes what now fits, after its commit."""
    transaction.on_commit(lambda: promotion.queue_promote(team_id, trigger="limit_change"))
