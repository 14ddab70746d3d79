"""Cancel while another transaction holds the execution's row (the orchestrator working on it):
a bounded wait, then a clear answer — never a 30 s hang and an HTML 500."""

from __future__ import annotations

import psycopg
import pytest
from django.urls import reverse

from executions.models import Execution, Status
from executions.services.admission import execution_admit
from tests.api.conftest import client_of
from tests.processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_cancel_of_a_locked_execution_answers_busy_then_cancels(
    team, make_workflow, make_user, client
):
    execution = execution_admit(team=team, workflow=make_workflow(team)).execution
    api = client_of(team)
    client.force_login(make_user("ann", teams=(team,)))
    with psycopg.connect(database_url()) as holder:
        # Without a bounded wait the cancel would wait for this holder: end it in 20 s then.
        holder.execute("SET idle_in_transaction_session_timeout = '20s'")
        holder.execute(
            "SELECT 1 FROM executions_execution WHERE id = %s FOR UPDATE", [execution.id]
        )
        response = api.post(f"/api/v1/executions/{execution.id}/cancel")
        assert response.status_code == 503
        assert response.json()["error"] == "busy"
        page = client.post(reverse("dashboard:cancel", args=[execution.id]), follow=True)
        assert b"was not cancelled: the execution is being updated" in page.content
        assert Execution.objects.get(id=execution.id).status == Status.PENDING
    # The holder's transaction ended with its connection: now it cancels.
    assert api.post(f"/api/v1/executions/{execution.id}/cancel").status_code == 200
    assert Execution.objects.get(id=execution.id).status == Status.CANCELLED
