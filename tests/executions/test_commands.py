from __future__ import annotations

import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from tests.commands import exit_code, run
from tests.factories import ExecutionFactory
from workflows.models import WorkflowDefinition


@pytest.mark.django_db
class TestRun:
    def test_it_prints_the_id_and_status(self, team, make_workflow):
        make_workflow(team, limit=1)
        first = run("mantle_run", "deploy", "--team", "acme").split()
        second = run("mantle_run", "deploy", "--team", "acme").split()
        assert first[1] == "pending"
        assert second[1:3] == ["queued", "queue"]
        assert Execution.objects.get(id=second[0]).status == Status.QUEUED

    def test_a_rejection_exits_3_and_names_scope_and_limit(self, team, make_workflow):
        make_workflow(team, limit=1, on_limit="reject")
        run("mantle_run", "deploy", "--team", "acme")
        with pytest.raises(CommandError, match="workflow concurrency limit of 1") as raised:
            run("mantle_run", "deploy", "--team", "acme")
        assert raised.value.returncode == 3

    def test_a_full_queue_exits_3(self, team, make_workflow):
        make_workflow(team, limit=1, extra="max_queued: 1\n")
        run("mantle_run", "deploy", "--team", "acme")
        run("mantle_run", "deploy", "--team", "acme")
        with pytest.raises(CommandError, match=r"the queue is full \(1 queued") as raised:
            run("mantle_run", "deploy", "--team", "acme")
        assert raised.value.returncode == 3

    def test_force_bypasses_the_limit(self, team, make_workflow):
        make_workflow(team, limit=1, on_limit="reject")
        run("mantle_run", "deploy", "--team", "acme")
        assert run("mantle_run", "deploy", "--team", "acme", "--force").split()[1] == "pending"
        assert Execution.objects.get(forced=True).status == Status.PENDING

    def test_unknown_workflow_or_team_exits_2(self, team):
        assert exit_code("mantle_run", "nope", "--team", "acme") == 2
        assert exit_code("mantle_run", "nope", "--team", "nobody") == 2

    def test_inputs_are_typed_by_the_declaration(self, team, make_workflow):
        make_workflow(
            team,
            extra="inputs:\n  count:\n    type: number\n  dry:\n    type: boolean\n"
            "  env:\n    type: string\n",
        )
        output = run(
            "mantle_run",
            "deploy",
            "--team",
            "acme",
            "--input",
            "count=3",
            "--input",
            "dry=true",
            "--input",
            "env=prod",
        )
        execution = Execution.objects.get(id=output.split()[0])
        assert execution.inputs == {"count": 3, "dry": True, "env": "prod"}
        assert exit_code("mantle_run", "deploy", "--team", "acme", "--input", "count=x") == 2
        assert exit_code("mantle_run", "deploy", "--team", "acme", "--input", "nokey") == 2

    def test_an_undeclared_input_is_kept_with_a_warning(self, team, make_workflow, capsys):
        make_workflow(team)
        call_command("mantle_run", "deploy", "--team", "acme", "--input", "customer=acme")
        out, err = capsys.readouterr()
        assert (
            err == "warning: inputs.customer: undeclared input (accepted: inputs are an open map)\n"
        )
        execution = Execution.objects.get(id=out.split()[0])
        assert execution.inputs == {"customer": "acme"}


@pytest.mark.django_db
def test_status_prints_the_status_word_first(team, make_workflow):
    make_workflow(team, limit=1)
    execution_admit(team=team, workflow=WorkflowDefinition.objects.get())
    queued = execution_admit(team=team, workflow=WorkflowDefinition.objects.get()).execution
    lines = run("mantle_status", str(queued.id)).splitlines()
    assert lines[0] == "queued"
    assert lines[1] == "queue position 1, blocked by workflow"


@pytest.mark.django_db
def test_cancel_exits_0_then_1_on_a_terminal_execution(team, make_workflow):
    execution = execution_admit(team=team, workflow=make_workflow(team)).execution
    assert "cancelled" in run("mantle_cancel", str(execution.id))
    assert exit_code("mantle_cancel", str(execution.id)) == 1


@pytest.mark.django_db
def test_status_and_cancel_take_a_unique_prefix_of_the_id(team, make_workflow):
    workflow = make_workflow(team)
    one = ExecutionFactory(workflow=workflow, id=uuid.UUID("807377de-0000-4000-8000-000000000001"))
    ExecutionFactory(workflow=workflow, id=uuid.UUID("807377df-0000-4000-8000-000000000002"))
    # The 8 hex digits the dashboard and the admin show; any case, dashes or not.
    assert run("mantle_status", "807377de").splitlines()[0] == "pending"
    assert run("mantle_status", "807377DE-0000").splitlines()[0] == "pending"
    assert run("mantle_cancel", "807377de").strip() == f"{one.id} cancelled"
    one.refresh_from_db()
    assert one.status == "cancelled"


@pytest.mark.django_db
def test_an_ambiguous_unknown_or_malformed_id_is_exit_2_with_the_reason(team, make_workflow):
    workflow = make_workflow(team)
    ExecutionFactory(workflow=workflow, id=uuid.UUID("807377de-0000-4000-8000-000000000001"))
    ExecutionFactory(workflow=workflow, id=uuid.UUID("807377df-0000-4000-8000-000000000002"))
    with pytest.raises(CommandError) as ambiguous:
        run("mantle_status", "807377d")
    assert ambiguous.value.returncode == 2
    assert str(ambiguous.value) == (
        "807377d is ambiguous: 807377de-0000-4000-8000-000000000001, "
        "807377df-0000-4000-8000-000000000002 and maybe more start with it; give more of the id"
    )
    assert exit_code("mantle_cancel", "807377d") == 2
    with pytest.raises(CommandError) as unknown:
        run("mantle_status", "abc")
    assert (unknown.value.returncode, str(unknown.value)) == (2, "no execution abc")
    with pytest.raises(CommandError) as malformed:
        run("mantle_status", "8073-xyz")
    assert "'8073-xyz' is not an execution id or its start" in str(malformed.value)


@pytest.mark.django_db
def test_limits_list_of_an_unknown_team_prints_no_table_before_the_error():
    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("mantle_limits", "list", "nobody", stdout=out)
    assert (raised.value.returncode, str(raised.value)) == (2, "unknown team 'nobody'")
    assert out.getvalue() == ""
