"""Every number and duration is bounded where it enters (docs/hostile-input.md, Bounds): each
numeric and duration field of the workflow YAML, of the API's bodies and query strings, swept
with values past what the columns and datetime hold — a 4xx naming the field, never a 500, and
nothing written."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from executions.models import Execution
from teams.models import NamedLimit, NamedRate
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db

HOSTILE = [-1, 2**31, 2**63, 10**20, '"NaN"', '"inf"', '"99999999999h"', "99999999999999999999h"]

# field → the YAML of a workflow with the field set to {value}
FIELDS = {
    "max_parallel_executions": "max_parallel_executions: {value}\n",
    "max_queued": "max_queued: {value}\n",
    "max_parallel_per_key": (
        'concurrency_key: "{{{{ inputs.c }}}}"\nmax_parallel_per_key: {value}\n'
    ),
    "priority": "priority: {value}\n",
    "rate_limit.max": "rate_limit: {{max: {value}, period: 1m}}\n",
    "rate_limit.period": "rate_limit: {{max: 1, period: {value}}}\n",
    "timeout": "timeout: {value}\n",
    "queue_timeout": "queue_timeout: {value}\n",
    "debounce": "debounce: {value}\n",
}
STEP_FIELDS = {
    "steps[0].timeout": "    timeout: {value}\n",
    "steps[0].retry.max_attempts": "    retry: {{max_attempts: {value}}}\n",
    "steps[0].max_parallel": "    for_each: [1, 2]\n    max_parallel: {value}\n",
}


def document(field: str, value: object) -> str:
    head = "name: w\ninputs:\n  c: {type: string}\n"
    step = "  - name: a\n    action: test/noop\n"
    if field in FIELDS:
        return head + FIELDS[field].format(value=value) + "steps:\n" + step
    return head + "steps:\n" + step + STEP_FIELDS[field].format(value=value)


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("field", [*FIELDS, *STEP_FIELDS])
def test_a_number_past_its_bound_is_a_yaml_error_naming_the_field(api, field, value) -> None:
    response = api.put(
        "/api/v1/workflows/w", document(field, value), content_type="application/yaml"
    )
    assert (response.status_code, response.json()["error"]) == (400, "invalid_workflow")
    errors = response.json()["errors"]
    assert [error["path"] for error in errors] == [field], errors
    assert errors[0]["line"] > 0
    assert not WorkflowDefinition.objects.exists()


@pytest.mark.parametrize("field", ["max_parallel_executions", "max_queued", "rate_limit.max"])
def test_the_largest_count_is_accepted(api, field) -> None:
    response = api.put(
        "/api/v1/workflows/w", document(field, 2**31 - 1), content_type="application/yaml"
    )
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize("field", ["timeout", "debounce", "queue_timeout", "steps[0].timeout"])
def test_thirty_days_is_the_longest_duration(api, field) -> None:
    ok = api.put("/api/v1/workflows/w", document(field, "720h"), content_type="application/yaml")
    assert ok.status_code == 201, ok.json()
    over = api.put("/api/v1/workflows/w", document(field, "721h"), content_type="application/yaml")
    assert over.status_code == 400
    assert over.json()["errors"][0]["message"] == "must be at most 30 days (720h)"


@pytest.mark.parametrize("value", [-1, 2**31, 2**63, 10**20, "NaN", "inf", "1e20", "9" * 5000])
def test_a_named_limit_past_its_bound_is_400(api, value) -> None:
    response = api.put("/api/v1/limits/db", {"max": value}, format="json")
    assert (response.status_code, response.json()["error"]) == (400, "invalid_request")
    assert not NamedLimit.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"max": 2**31, "period": "1s"},
        {"max": 10**20, "period": "1s"},
        {"max": 1, "period": "99999999999h"},
        {"max": 1, "period": "721h"},
        {"max": 1, "period": "inf"},
    ],
)
def test_a_named_rate_past_its_bounds_is_400(api, body) -> None:
    response = api.put("/api/v1/rates/stripe-calls", body, format="json")
    assert response.status_code == 400, response.content
    assert not NamedRate.objects.exists()


@pytest.mark.parametrize("word", ["2147483648/1s", "0/1s", "1/99999999999h", "1/721h", "x/1s"])
def test_a_named_rate_past_its_bounds_is_exit_2_on_the_command_line(team, word) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("mantle_rates", "set", team.slug, "stripe-calls", word)
    assert refused.value.returncode == 2
    assert not NamedRate.objects.exists()


def test_the_largest_named_limit_is_accepted(api) -> None:
    response = api.put("/api/v1/limits/db", {"max": 2**31 - 1}, format="json")
    assert response.status_code == 201
    assert NamedLimit.objects.get().max == 2**31 - 1


@pytest.mark.parametrize("value", [-1, 10, 2**31, 2**63, 10**20, "NaN", "inf", 1e308])
def test_a_run_priority_past_its_bound_is_400(api, team, make_workflow, value) -> None:
    make_workflow(team)
    response = api.post("/api/v1/run/deploy", {"priority": value}, format="json")
    assert response.status_code == 400
    assert not Execution.objects.exists()


@pytest.mark.parametrize("value", ["0", "-1", str(2**31), str(2**63), "1e20", "NaN", "inf"])
@pytest.mark.parametrize(
    "url", ["/api/v1/executions?limit={}", "/api/v1/executions/{id}/steps?limit={}"]
)
def test_a_page_size_past_its_bound_is_400(api, team, make_workflow, url, value) -> None:
    make_workflow(team)
    run = api.post("/api/v1/run/deploy", {}, format="json")
    response = api.get(url.replace("{id}", run.json()["execution_id"]).format(value))
    assert 400 <= response.status_code < 500
