"""An admitted pending execution is announced to the step workers once, right after its
admission commits and not in that commit (executions/sql/admission.sql, wake_workers); every
other row that becomes pending is still announced at its own commit by the trigger."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, transaction

from core import locks
from executions.models import Execution, Status
from executions.services import admission
from executions.services.admission import execution_admit
from executions.services.lifecycle import execution_finish
from executions.sql import WORK_CHANNEL

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listener() -> Iterator[psycopg.Connection[Any]]:
    connection = locks.listen(WORK_CHANNEL)
    yield connection
    connection.close()


def announcements(listener: psycopg.Connection[Any]) -> int:
    """The notifications on the work channel that reached `listener` within half a second."""
    return sum(1 for _ in listener.notifies(timeout=0.5))


def test_a_pending_admission_is_announced_once_and_a_queued_one_not(team, make_workflow, listener):
    workflow = make_workflow(team, limit=1)
    assert execution_admit(team=team, workflow=workflow).status == Status.PENDING
    # Announced in its commit too, it would be twice: two transactions' notifications both arrive.
    assert announcements(listener) == 1
    assert execution_admit(team=team, workflow=workflow).status == Status.QUEUED
    assert announcements(listener) == 0


def test_the_admission_commit_itself_announces_nothing(team, make_workflow, listener, monkeypatch):
    monkeypatch.setattr(admission, "_wake_workers", lambda: None)
    workflow = make_workflow(team)
    assert execution_admit(team=team, workflow=workflow).status == Status.PENDING
    assert announcements(listener) == 0


def test_inside_a_callers_transaction_the_announcement_follows_its_commit(
    team, make_workflow, listener
):
    workflow = make_workflow(team)
    with transaction.atomic():
        execution_admit(team=team, workflow=workflow)
        execution_admit(team=team, workflow=workflow)
        assert announcements(listener) == 0
    assert announcements(listener) >= 1
    with transaction.atomic():
        execution_admit(team=team, workflow=workflow)
        transaction.set_rollback(True)
    assert announcements(listener) == 0


def test_a_promotion_is_still_announced_at_its_commit(team, make_workflow, listener):
    workflow = make_workflow(team, limit=1)
    running = execution_admit(team=team, workflow=workflow).execution
    queued = execution_admit(team=team, workflow=workflow).execution
    announcements(listener)
    execution_finish(running.id, status=Status.COMPLETED)
    assert Execution.objects.get(id=queued.id).status == Status.PENDING
    assert announcements(listener) == 1


def test_an_admission_stands_when_its_announcement_fails(team, make_workflow, monkeypatch):
    def fail() -> None:
        raise DatabaseError("connection lost after the commit")

    monkeypatch.setattr(admission, "_wake_workers", fail)
    workflow = make_workflow(team)
    admitted = execution_admit(team=team, workflow=workflow)
    assert Execution.objects.get(id=admitted.execution.id).status == Status.PENDING
