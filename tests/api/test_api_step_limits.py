"""What a step waiting for a step-scope limit shows (docs/limits.md, Step scope): its status
`waiting` with blocked_by "limit" and the limit's name in the execution's JSON, the limit's units
in use and waiting steps in GET /api/v1/limits, and the gauges. Steps are claimed here by the
engine's own limit-aware claim (mantle_claim_limited), without workers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engine import dispatch, orchestrator
from executions.services.admission import execution_admit
from teams.models import NamedRate
from teams.services import named_limit_set
from tests.commands import exit_code, run
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db(transaction=True)

CHARGE = """
name: charge
steps:
  - name: call
    action: test/noop
    limits: [{name: stripe-api, units: 2}, audit]
"""


@pytest.fixture
def two_executions(team):
    """Two executions started: the first's step holds 2 of stripe-api's 3 units, the second's
    waits for them."""
    named_limit_set(team=team, name="stripe-api", max=3)
    named_limit_set(team=team, name="audit", max=0)
    workflow = workflow_apply(team=team, content=CHARGE).workflow
    executions = [execution_admit(team=team, workflow=workflow).execution for _ in range(2)]
    orchestrator.executions_start(10, owner="test", room=0)
    [claim] = dispatch.steps_claim_limited("test", 10)
    return sorted(executions, key=lambda execution: execution.id != claim.execution_id)


def test_a_waiting_step_shows_the_limit_it_waits_for(api, two_executions):
    holder, waiter = two_executions
    [running] = api.get(f"/api/v1/executions/{holder.id}").json()["steps"]
    assert (running["status"], running["blocked_by"], running["blocked_by_name"]) == (
        "running",
        None,
        None,
    )
    body = api.get(f"/api/v1/executions/{waiter.id}").json()
    assert body["status"] == "running"
    [waiting] = body["steps"]
    assert (waiting["status"], waiting["blocked_by"], waiting["blocked_by_name"]) == (
        "waiting",
        "limit",
        "stripe-api",
    )


def test_the_limits_show_units_in_use_and_waiting_steps(api, two_executions):
    limits = {limit["name"]: limit for limit in api.get("/api/v1/limits").json()["limits"]}
    assert (limits["stripe-api"]["units_in_use"], limits["stripe-api"]["waiting_steps"]) == (2, 1)
    assert (limits["audit"]["units_in_use"], limits["audit"]["waiting_steps"]) == (1, 1)


def test_the_gauges_count_units_and_waiting_steps(client, two_executions):
    text = client.get("/metrics").content.decode()
    assert 'mantle_limit_units_in_use{limit="stripe-api",scope="team",team="acme"} 2.0' in text
    assert 'mantle_steps_waiting{limit="stripe-api"} 1.0' in text


def test_a_freed_unit_goes_to_the_waiting_step(two_executions):
    holder, waiter = two_executions
    assert dispatch.steps_claim_limited("test", 10) == []  # 1 unit free, 2 needed
    named_limit_set(team=holder.team, name="stripe-api", max=4)
    [claim] = dispatch.steps_claim_limited("test", 10)
    assert claim.execution_id == waiter.id


def test_a_limit_a_step_lists_or_waits_for_cannot_be_deleted(api, two_executions):
    response = api.delete("/api/v1/limits/stripe-api")
    assert response.status_code == 409
    assert "charge" in response.json()["detail"]


def test_a_rate_is_set_over_http_and_a_global_one_needs_a_staff_key(api, team):
    created = api.put("/api/v1/rates/stripe-calls", {"max": 100, "period": "1m"}, format="json")
    assert (created.status_code, created.json()) == (
        201,
        {
            "name": "stripe-calls",
            "max": 100,
            "period_seconds": 60.0,
            "per_key": False,
            "scope": "team",
        },
    )
    changed = api.put(
        "/api/v1/rates/stripe-calls", {"max": 5, "period": "1s", "per_key": True}, format="json"
    )
    assert (changed.status_code, changed.json()["per_key"]) == (200, True)
    bad = api.put("/api/v1/rates/stripe-calls", {"max": 5, "period": "soon"}, format="json")
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_rate")
    refused = api.put(
        "/api/v1/rates/shared", {"max": 5, "period": "1s", "scope": "global"}, format="json"
    )
    assert (refused.status_code, refused.json()["error"]) == (403, "staff_only")
    assert NamedRate.objects.get().period == timedelta(seconds=1)


def test_rates_set_on_the_command_line(team):
    assert run("mantle_rates", "set", "acme", "stripe-calls", "10/1m", "--per-key").strip() == (
        "stripe-calls created: max 10 per 60s per key"
    )
    assert run("mantle_rates", "set", "--global", "shared", "5/1s").strip() == (
        "shared (global) created: max 5 per 1s"
    )
    assert NamedRate.objects.get(name="shared").team is None
    assert exit_code("mantle_rates", "set", "acme", "x", "ten/1m") == 2
    assert exit_code("mantle_rates", "set", "nobody", "x", "1/1m") == 2
    assert exit_code("mantle_rates", "set", "acme", "x", "0/1m") == 2
