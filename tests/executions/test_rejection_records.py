from __future__ import annotations

import pytest

from executions.models import Execution, Rejection
from executions.services.admission import ConcurrencyLimitExceeded, execution_admit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_rejected_admission_leaves_a_rejection_record_and_no_execution(team, make_workflow):
    workflow = make_workflow(team, limit=1, on_limit="reject")
    execution_admit(team=team, workflow=workflow)
    with pytest.raises(ConcurrencyLimitExceeded):
        execution_admit(team=team, workflow=workflow)
    assert Execution.objects.filter(workflow=workflow).count() == 1
    rejection = Rejection.objects.get()
    assert (rejection.team_id, rejection.workflow_id, rejection.scope) == (
        team.id,
        workflow.id,
        "workflow",
    )


def test_a_queued_admission_records_no_rejection(team, make_workflow):
    workflow = make_workflow(team, limit=1)
    execution_admit(team=team, workflow=workflow)
    execution_admit(team=team, workflow=workflow)
    assert not Rejection.objects.exists()
