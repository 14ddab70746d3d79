from __future__ import annotations

import pytest
from django.db import connection

from executions.models import Execution, Status
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit
from executions.services.lifecycle import execution_finish
from workflows.schema import InvalidInputs

pytestmark = pytest.mark.django_db


def holders(workflow) -> int:
    return Execution.objects.filter(workflow=workflow, status__in=["pending", "running"]).count()


def test_it_admits_pending_under_the_limits(team, make_workflow):
    workflow = make_workflow(team, limit=2)
    admission = execution_admit(team=team, workflow=workflow)
    assert admission.execution.status == Status.PENDING
    assert admission.queue_position is None
    assert admission.execution.blocked_by is None
    assert admission.execution.queued_at is None
    assert admission.execution.version == workflow.current_version


def test_it_queues_behind_a_full_workflow_in_order(team, make_workflow):
    workflow = make_workflow(team, limit=1)
    execution_admit(team=team, workflow=workflow)
    first, second = (
        execution_admit(team=team, workflow=workflow),
        execution_admit(team=team, workflow=workflow),
    )
    assert [first.execution.status, second.execution.status] == [Status.QUEUED, Status.QUEUED]
    assert [first.queue_position, second.queue_position] == [1, 2]
    assert first.execution.blocked_by == "workflow"
    stored = Execution.objects.get(id=first.execution.id)
    assert stored.queued_at == stored.created_at


def test_it_queues_on_a_full_team_and_says_so(make_team, make_workflow):
    team = make_team(max_concurrent_executions=1)
    execution_admit(team=team, workflow=make_workflow(team, "a"))
    admission = execution_admit(team=team, workflow=make_workflow(team, "b"))
    assert admission.execution.status == Status.QUEUED
    assert admission.execution.blocked_by == "team"


def test_it_rejects_without_writing_when_on_limit_is_reject(team, make_workflow):
    workflow = make_workflow(team, limit=1, on_limit="reject")
    execution_admit(team=team, workflow=workflow)
    with pytest.raises(ConcurrencyLimitExceeded) as raised:
        execution_admit(team=team, workflow=workflow)
    assert (raised.value.scope, raised.value.limit) == ("workflow", 1)
    assert Execution.objects.filter(workflow=workflow).count() == 1


def test_the_team_limit_is_checked_first(make_team, make_workflow):
    team = make_team(max_concurrent_executions=1)
    workflow = make_workflow(team, limit=1, on_limit="reject")
    execution_admit(team=team, workflow=workflow)
    with pytest.raises(ConcurrencyLimitExceeded) as raised:
        execution_admit(team=team, workflow=workflow)
    assert (raised.value.scope, raised.value.limit) == ("team", 1)


def test_zero_means_unlimited_at_every_level(make_team, make_workflow):
    team = make_team(max_concurrent_executions=0)
    workflow = make_workflow(team, limit=0)
    statuses = {execution_admit(team=team, workflow=workflow).execution.status for _ in range(25)}
    assert statuses == {Status.PENDING}


def test_the_team_limit_falls_back_to_the_config_default(make_team, make_workflow, mantle_config):
    mantle_config("engine", max_concurrent_executions_per_team=2)
    team = make_team(max_concurrent_executions=None)
    assert team.effective_limit == 2
    workflow = make_workflow(team)
    statuses = [execution_admit(team=team, workflow=workflow).execution.status for _ in range(3)]
    assert statuses == [Status.PENDING, Status.PENDING, Status.QUEUED]


def test_a_team_override_beats_the_config_default(make_team, mantle_config):
    mantle_config("engine", max_concurrent_executions_per_team=2)
    assert make_team(max_concurrent_executions=0).effective_limit == 0
    assert make_team(max_concurrent_executions=7).effective_limit == 7


def test_force_admits_past_every_limit_and_then_holds_a_slot(make_team, make_workflow):
    team = make_team(max_concurrent_executions=1)
    workflow = make_workflow(team, limit=1, on_limit="reject")
    execution_admit(team=team, workflow=workflow)
    forced = execution_admit(team=team, workflow=workflow, force=True)
    assert forced.execution.status == Status.PENDING
    assert forced.execution.forced is True
    assert holders(workflow) == 2


def test_a_newcomer_never_overtakes_the_queue_of_its_workflow(team, make_workflow):
    workflow = make_workflow(team, limit=1)
    running = execution_admit(team=team, workflow=workflow).execution
    queued = execution_admit(team=team, workflow=workflow).execution
    # The slot frees, but the promotion that follows commit has not run yet.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE executions_execution SET status = 'completed' WHERE id = %s", [running.id]
        )
    newcomer = execution_admit(team=team, workflow=workflow)
    assert newcomer.execution.status == Status.QUEUED
    assert newcomer.queue_position == 2
    assert Execution.objects.get(id=queued.id).status == Status.QUEUED


def test_a_newcomer_never_overtakes_a_team_blocked_execution(make_team, make_workflow):
    team = make_team(max_concurrent_executions=1)
    first = execution_admit(team=team, workflow=make_workflow(team, "a")).execution
    execution_admit(team=team, workflow=make_workflow(team, "b"))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE executions_execution SET status = 'completed' WHERE id = %s", [first.id]
        )
    newcomer = execution_admit(team=team, workflow=make_workflow(team, "c"))
    assert newcomer.execution.blocked_by == "team"


def test_other_workflows_pass_a_workflow_blocked_queue(team, make_workflow):
    busy = make_workflow(team, "busy", limit=1)
    execution_admit(team=team, workflow=busy)
    execution_admit(team=team, workflow=busy)
    other = execution_admit(team=team, workflow=make_workflow(team, "other"))
    assert other.execution.status == Status.PENDING


def test_bad_inputs_are_refused_before_anything_is_written(team, make_workflow):
    workflow = make_workflow(team, extra="inputs:\n  count:\n    type: number\n")
    with pytest.raises(InvalidInputs):
        execution_admit(team=team, workflow=workflow, inputs={"count": "many"})
    assert not Execution.objects.exists()


def test_inputs_get_their_defaults(team, make_workflow):
    workflow = make_workflow(team, extra="inputs:\n  env:\n    type: string\n    default: prod\n")
    assert execution_admit(team=team, workflow=workflow).execution.inputs == {"env": "prod"}


def test_an_execution_keeps_the_version_it_was_admitted_with(team, make_workflow):
    workflow = make_workflow(team, limit=1)
    execution = execution_admit(team=team, workflow=workflow).execution
    first_version = workflow.current_version
    updated = make_workflow(team, limit=3)
    assert updated.current_version.number == 2
    execution.refresh_from_db()
    assert execution.version == first_version


def test_finishing_twice_is_refused(team, make_workflow):
    execution = execution_admit(team=team, workflow=make_workflow(team)).execution
    assert execution_finish(execution.id, status=Status.COMPLETED) is True
    assert execution_finish(execution.id, status=Status.FAILED) is False
    execution.refresh_from_db()
    assert execution.status == Status.COMPLETED


def test_a_connection_prepares_the_admission_statement_once_it_runs_often(team, make_workflow):
    workflow = make_workflow(team)
    for _ in range(6):
        execution_admit(team=team, workflow=workflow)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [statement for (statement,) in cursor.fetchall()]
    assert any("mantle_admit(" in statement for statement in prepared), prepared
