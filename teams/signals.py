"""Signals teams and workflows send for the layers above them to act on.

`limit_loosened` is sent inside the transaction that raised or cleared a limit (a team's, or a
workflow's with a new version); executions.signals promotes the team after that commit. So every
trigger of promotion lives in executions/signals.py, and teams and workflows never import it.
"""

from __future__ import annotations

from django.dispatch import Signal

limit_loosened = Signal()  # kwargs: team_id


def loosens(old_limit: int, new_limit: int) -> bool:
    """0 is unlimited: a change to 0, or to a larger limit, frees slots."""
    return old_limit != 0 and (new_limit == 0 or new_limit > old_limit)
