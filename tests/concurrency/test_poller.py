from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from core import locks
from executions.models import Execution, Status
from executions.services import promotion
from executions.services.admission import execution_admit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_busy_team_does_not_cost_the_other_teams_their_backup_promotion(make_team, make_workflow):
    busy, calm = make_team(max_concurrent_executions=1), make_team(max_concurrent_executions=1)
    waiting = {}
    for team in (busy, calm):
        workflow = make_workflow(team)
        holder = execution_admit(team=team, workflow=workflow).execution
        waiting[team.id] = execution_admit(team=team, workflow=workflow).execution
        # The holder finished, but its promotion was lost: the poller's job.
        Execution.objects.filter(id=holder.id).update(status=Status.COMPLETED)
    held, release = threading.Event(), threading.Event()

    def hold_busy_team_lock() -> None:
        try:
            with transaction.atomic():
                locks.lock_team(busy.id)
                held.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    holder_thread = threading.Thread(target=hold_busy_team_lock)
    holder_thread.start()
    try:
        assert held.wait(timeout=10)
        assert promotion.queue_promote_all(trigger="poller") == 1
    finally:
        release.set()
        holder_thread.join()
        connections.close_all()
    assert Execution.objects.get(id=waiting[calm.id].id).status == Status.PENDING
    assert Execution.objects.get(id=waiting[busy.id].id).status == Status.QUEUED
    assert promotion.queue_promote_all(trigger="poller") == 1  # the lock is free again
