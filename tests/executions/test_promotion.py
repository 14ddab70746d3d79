from __future__ import annotations

import contextlib

import pytest
from django.db import transaction

from executions import signals
from executions.models import Execution, Status
from executions.services import promotion
from executions.services.admission import execution_admit
from executions.services.lifecycle import NotCancellable, execution_cancel, execution_finish
from teams.services import team_set_limit

pytestmark = pytest.mark.django_db


def statuses(executions) -> list[str]:
    return [Execution.objects.get(id=e.id).status for e in executions]


@pytest.mark.parametrize(
    "terminal", [Status.COMPLETED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT]
)
def test_every_terminal_status_promotes_the_oldest_queued(
    terminal, team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1)
    running = execution_admit(team=team, workflow=workflow).execution
    queued = [execution_admit(team=team, workflow=workflow).execution for _ in range(2)]
    with django_capture_on_commit_callbacks(execute=True):
        execution_finish(running.id, status=terminal)
    assert statuses(queued) == [Status.PENDING, Status.QUEUED]
    promoted = Execution.objects.get(id=queued[0].id)
    assert promoted.promoted_at is not None
    assert promoted.blocked_by is None


def test_a_transaction_ending_many_executions_of_a_team_promotes_it_once(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=2)
    running = [execution_admit(team=team, workflow=workflow).execution for _ in range(2)]
    queued = [execution_admit(team=team, workflow=workflow).execution for _ in range(3)]
    with django_capture_on_commit_callbacks(execute=True) as callbacks, transaction.atomic():
        for execution in running:
            execution_finish(execution.id, status=Status.COMPLETED)
    assert statuses(queued) == [Status.PENDING, Status.PENDING, Status.QUEUED]
    assert sum(isinstance(callback, signals._Promote) for callback in callbacks) == 1


def test_a_promotion_dropped_with_a_rolled_back_savepoint_does_not_stand_in_for_another(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=2)
    running = [execution_admit(team=team, workflow=workflow).execution for _ in range(2)]
    queued = execution_admit(team=team, workflow=workflow).execution
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        with contextlib.suppress(ZeroDivisionError), transaction.atomic():
            execution_finish(running[0].id, status=Status.COMPLETED)
            raise ZeroDivisionError  # this transition, and its promotion, roll back
        execution_finish(running[1].id, status=Status.COMPLETED)
    assert statuses([*running, queued]) == [Status.PENDING, Status.COMPLETED, Status.PENDING]


def test_cancel_works_from_queued_pending_and_running(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1)
    pending = execution_admit(team=team, workflow=workflow).execution
    queued = execution_admit(team=team, workflow=workflow).execution
    with django_capture_on_commit_callbacks(execute=True):
        execution_cancel(queued.id)
    assert statuses([pending, queued]) == [Status.PENDING, Status.CANCELLED]
    Execution.objects.filter(id=pending.id).update(status=Status.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        execution_cancel(pending.id)
    assert statuses([pending]) == [Status.CANCELLED]


def test_cancel_is_refused_on_a_terminal_execution(team, make_workflow):
    execution = execution_admit(team=team, workflow=make_workflow(team)).execution
    execution_finish(execution.id, status=Status.COMPLETED)
    with pytest.raises(NotCancellable) as raised:
        execution_cancel(execution.id)
    assert raised.value.status == Status.COMPLETED


def test_the_team_queue_is_promoted_oldest_first_across_workflows(make_team, make_workflow):
    team = make_team(max_concurrent_executions=2)
    a, b = make_workflow(team, "a"), make_workflow(team, "b")
    holders = [execution_admit(team=team, workflow=a).execution for _ in range(2)]
    order = [execution_admit(team=team, workflow=wf).execution for wf in (b, a, b, a)]
    Execution.objects.filter(id__in=[h.id for h in holders]).update(status=Status.COMPLETED)
    promoted = promotion.queue_promote(team.id, trigger="poller")
    assert promoted == [order[0].id, order[1].id]
    assert statuses(order) == [Status.PENDING, Status.PENDING, Status.QUEUED, Status.QUEUED]
    # The team is full again: what is left waits for the team.
    assert {e.blocked_by for e in Execution.objects.filter(status=Status.QUEUED)} == {"team"}


def test_a_full_workflow_is_skipped_and_the_next_workflow_promoted(make_team, make_workflow):
    team = make_team(max_concurrent_executions=2)
    narrow, wide = make_workflow(team, "narrow", limit=1), make_workflow(team, "wide")
    execution_admit(team=team, workflow=narrow)
    freed = execution_admit(team=team, workflow=wide).execution
    narrow_queued = execution_admit(team=team, workflow=narrow).execution
    wide_queued = execution_admit(team=team, workflow=wide).execution
    Execution.objects.filter(id=freed.id).update(status=Status.COMPLETED)
    assert promotion.queue_promote(team.id, trigger="poller") == [wide_queued.id]
    assert Execution.objects.get(id=narrow_queued.id).blocked_by == "team"


def test_the_remaining_queue_is_labelled_by_its_workflow_when_the_team_has_room(
    make_team, make_workflow
):
    team = make_team(max_concurrent_executions=3)
    workflow = make_workflow(team, limit=1)
    execution_admit(team=team, workflow=workflow)
    queued = execution_admit(team=team, workflow=workflow).execution
    assert promotion.queue_promote(team.id, trigger="poller") == []
    assert Execution.objects.get(id=queued.id).blocked_by == "workflow"


def test_raising_a_team_limit_promotes_what_now_fits(
    make_team, make_workflow, django_capture_on_commit_callbacks
):
    team = make_team(max_concurrent_executions=1)
    workflow = make_workflow(team)
    execution_admit(team=team, workflow=workflow)
    queued = [execution_admit(team=team, workflow=workflow).execution for _ in range(3)]
    with django_capture_on_commit_callbacks(execute=True):
        team_set_limit(team=team, max_concurrent_executions=3)
    assert statuses(queued) == [Status.PENDING, Status.PENDING, Status.QUEUED]
    with django_capture_on_commit_callbacks(execute=True):
        team_set_limit(team=team, max_concurrent_executions=None)  # config default: unlimited
    assert statuses(queued) == [Status.PENDING] * 3


def test_a_new_version_with_a_higher_limit_promotes(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1)
    execution_admit(team=team, workflow=workflow)
    queued = [execution_admit(team=team, workflow=workflow).execution for _ in range(2)]
    with django_capture_on_commit_callbacks(execute=True):
        make_workflow(team, limit=2)
    assert statuses(queued) == [Status.PENDING, Status.QUEUED]


def test_the_poller_recovers_a_lost_promotion(make_team, make_workflow):
    team = make_team(max_concurrent_executions=1)
    workflow = make_workflow(team)
    running = execution_admit(team=team, workflow=workflow).execution
    queued = execution_admit(team=team, workflow=workflow).execution
    # The finisher died after its commit: no on-commit promotion ran.
    execution_finish(running.id, status=Status.COMPLETED)
    assert statuses([queued]) == [Status.QUEUED]
    assert promotion.queue_promote_all(trigger="poller") == 1
    assert statuses([queued]) == [Status.PENDING]


def test_forced_executions_count_against_the_limit_when_promoting(make_team, make_workflow):
    team = make_team(max_concurrent_executions=1)
    workflow = make_workflow(team)
    first = execution_admit(team=team, workflow=workflow).execution
    queued = execution_admit(team=team, workflow=workflow).execution
    execution_admit(team=team, workflow=workflow, force=True)
    Execution.objects.filter(id=first.id).update(status=Status.COMPLETED)
    assert promotion.queue_promote(team.id, trigger="poller") == []
    assert statuses([queued]) == [Status.QUEUED]
