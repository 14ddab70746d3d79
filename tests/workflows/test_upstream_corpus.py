"""Workflows written the way upstream Mantle's examples and docs write them (tests/workflows/
upstream/): no depends_on where a step reads an earlier one, upstream's CEL functions, env,
.error fallbacks. Each is validated, applied and run to completion by a real worker cluster
against a local HTTP API, and its outputs are asserted."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from pytest_django import DjangoDbBlocker

from executions.models import Execution, StepExecution
from executions.services.admission import execution_admit
from teams.services import team_create
from tests.engine.conftest import wait_terminal
from tests.processes import Cluster
from tests.servers import Handler, local, serving
from workflows.models import WorkflowDefinition
from workflows.schema import parse_workflow, validate_workflow
from workflows.services import workflow_apply

CORPUS = Path(__file__).parent / "upstream"


ORDER_10 = {"id": 10, "total": "12.50"}
ORDER_11 = {"id": 11, "total": "3.05"}
ORDER_12 = {"id": 12, "total": "7"}


class FakeApi(Handler):
    notified: list[object] = []

    def do_GET(self) -> None:
        routes: dict[str, tuple[int, object]] = {
            "/users/u1": (200, {"id": "u1", "name": "Ada", "tier": "gold"}),
            "/users/u2": (200, {"id": "u2", "name": "Bob", "tier": "silver"}),
            "/users/u1/orders": (200, {"orders": [ORDER_10, ORDER_11, ORDER_12]}),
            "/health": (200, {"status": "ok"}),
            "/fail": (500, {"error": "upstream is down"}),
        }
        self.reply(*routes.get(self.path, (404, {"error": "not found"})))

    def do_POST(self) -> None:
        body = json.loads(self.body())
        FakeApi.notified.append(body)
        self.reply(200, {"received": body})


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    with serving(local(FakeApi)) as url:
        yield url


@pytest.fixture
def notified() -> list[object]:
    """What the workflows POSTed to the API during this test."""
    FakeApi.notified = []
    return FakeApi.notified


@pytest.fixture(scope="module")
def database(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[None]:
    """The test database, committed to by every test of the module (the workers see only
    committed rows) and emptied once, after the cluster has stopped."""
    with django_db_blocker.unblock():
        yield
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture
def transactional_db(database: None) -> None:
    """pytest-django's transactional_db empties the database after each test. Here the cluster
    runs across tests, and that TRUNCATE can deadlock with a transaction of its clock (a cron
    tick's admission, the reaper, a queue sample): CI once failed "Database test_mantle
    couldn't be flushed", and the next test found the last one's team."""


def workers_env(api: str) -> dict[str, str]:
    return {"API_BASE_URL": api, "REGION": "eu-west-1"}


@pytest.fixture(scope="module")
def cluster(database: None, api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One worker cluster (`mantle serve --workers-only`) for every run of the module: it only
    claims what each test admits, each test's under a team of its own. Started per test it cost
    about 7 s each."""
    # The workers read env from MANTLE_ENV_* of their own environment (docs/workflows.md).
    env = {f"MANTLE_ENV_{name}": value for name, value in workers_env(api).items()}
    log = tmp_path_factory.mktemp("corpus") / "cluster.log"
    cluster = Cluster(workers=2, slots=100, broker="orm", log=log, env=env)
    yield
    cluster.stop()


TEAMS = itertools.count()


@pytest.fixture
def apply(transactional_db: None) -> Callable[[str], WorkflowDefinition]:
    team = team_create(slug=f"upstream-{next(TEAMS)}")
    return lambda content: workflow_apply(team=team, content=content).workflow


def run(
    workflow: WorkflowDefinition, inputs: dict | None = None, trigger: dict | None = None
) -> Execution:
    admission = execution_admit(
        team=workflow.team, workflow=workflow, inputs=inputs or {}, trigger=trigger
    )
    return wait_terminal(admission.execution, timeout=60)


def outputs(execution: Execution) -> dict[str, object]:
    rows = StepExecution.objects.filter(execution=execution, fanout_index__isnull=True)
    return {row.name: row.output for row in rows}


# file → (inputs, trigger, the outputs of some of its steps)
EXPECTED: dict[str, tuple[dict, dict | None, dict[str, object]]] = {
    "chained-requests": (
        {"user_id": "u1"},
        None,
        {"summary": {"name": "Ada", "orders": 3, "first_total": 12.5}},
    ),
    "conditional-branches": (
        {"user_id": "u1"},
        None,
        {
            "vip": {"message": "Welcome back, Ada"},
            "report": {"vip": "completed", "standard": "skipped", "message": "Welcome back, Ada"},
        },
    ),
    "cron-health-check": (
        {},
        {"type": "cron", "schedule": "*/5 * * * *"},
        {
            "record": {
                "healthy": True,
                "region": "EU-WEST-1",
                "checked_today": True,
                "trigger": "cron",
            }
        },
    ),
    "webhook-processor": (
        {},
        {
            "type": "webhook",
            "payload": {
                "event": "  Order.Created ",
                "batches": [["sku-1", "sku-2"], ["sku-3"], []],
                "customer": {"id": 7, "email": "Ada@Example.COM"},
            },
        },
        {
            "normalise": {
                "event": "order.created",
                "skus": ["sku-1", "sku-2", "sku-3"],
                "customer": {"id": 7, "email": "ada@example.com"},
            },
            "done": {"forwarded": 3},
        },
    ),
    "open-inputs": (
        {"customer": {"id": 7}},
        None,
        {"greet": {"customer": {"id": 7}, "region": "eu"}},
    ),
    "continue-on-error-fallback": (
        {},
        None,
        {"result": {"value": "cached", "primary_error_empty": False}},
    ),
    "string-functions": (
        {},
        None,
        {
            "strings": {
                "lower": "  hello, mantle world  ",
                "upper": "  HELLO, MANTLE WORLD  ",
                "trimmed": "Hello, Mantle World",
                "replaced": "HeLLo, MantLe WorLd",
                "replace_nothing": "abc",
                "words": ["Hello,", "Mantle", "World"],
                "no_separator_found": ["abc"],
                "characters": ["a", "b", "c"],
                "empty": [""],
                "chained": ["a", "b", "c"],
            }
        },
    ),
    "number-conversion": (
        {},
        None,
        {
            "numbers": {
                "parsed": 43,
                "negative": -7,
                "float": 5.0,
                "exponent": 1000.0,
                "whole_double": "2",
                "big_double": "1.234567e+06",
                "bool": "true",
                "list": "[1 a 2.5]",
                "int": "7",
                "label": "Order #42",
            }
        },
    ),
    "default-function": (
        {},
        None,
        {
            "defaults": {
                "missing_key": 30,
                "null_value": "none",
                "present": 3,
                "error": -1,
                "nested_missing": "deep",
                "nested_default": "last",
                "in_condition": "on",
            },
            "later": {"missing_step_field": "fallback"},
        },
    ),
    "collections": (
        {},
        None,
        {
            "lists": {
                "mixed": [1, 2, 3, [4], "five"],
                "empty": [],
                "one_pair": {"a": 1},
                "five_pairs": {"a": 1, "b": "two", "c": [3], "d": {"e": 4}, "f": None},
            },
            "use": {"count": 5, "keys": "two"},
        },
    ),
    "json-functions": (
        {},
        None,
        {
            "encode": {
                "compact": '{"a":[true,null,2],"b":1,"html":"\\u003ca\\u0026b\\u003e"}',
                "decoded": {"id": 7, "price": 1.5, "tags": ["x"]},
                "round_trip": "v",
            },
            "report": {
                "status": "failed",
                "error": "expression \"jsonDecode('{not json')\" failed: jsonDecode: Expecting "
                "property name enclosed in double quotes: line 1 column 2 (char 1)",
                "fallback": {},
            },
        },
    ),
    "timestamps": (
        {},
        None,
        {
            "parse": {
                "rfc3339": "2024-03-04T05:06:07Z",
                "offset": "03:06:07.250",
                "local": "Mar 4, 2024 at 5:06AM",
                "date": "Monday, March 4",
                "us": "2024-03-04",
                "text": "04/03/24",
                "year": 2024,
            },
            "report": {
                "error": "expression \"parseTimestamp('yesterday')\" failed: parseTimestamp: "
                'unable to parse "yesterday" (tried RFC3339, ISO 8601 date, and common formats)'
            },
        },
    ),
    "fan-out-orders": (
        {},
        None,
        {
            "per-order": [
                {"id": 10, "position": 1, "cents": 1250},
                {"id": 11, "position": 2, "cents": 305},
                {"id": 12, "position": 3, "cents": 700},
            ],
            "total": {"ids": [10, 11, 12]},
        },
    ),
}


def test_the_corpus_has_a_dozen_workflows_each_with_expectations() -> None:
    names = sorted(path.stem for path in CORPUS.glob("*.yaml"))
    assert len(names) >= 12
    assert names == sorted(EXPECTED)


# file → the warnings of its validation (path, message up to its explanation); the rest have none
WARNINGS: dict[str, list[tuple[str, str]]] = {
    "open-inputs": [
        (
            "steps[0].max_parallel",
            "is ignored: it bounds the branches of a for_each, and this step has none",
        ),
        ("steps[0].params.customer", 'expression "inputs.customer": undeclared input "customer"'),
    ],
}


# file → what it POSTed to the API (the rest POST nothing)
NOTIFIED: dict[str, list[object]] = {
    "webhook-processor": [{"customer": {"id": 7, "email": "ada@example.com"}, "count": 3}],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_upstream_workflow_runs_as_written(
    name: str,
    cluster: None,
    apply: Callable[..., WorkflowDefinition],
    notified: list[object],
    api: str,
    settings: Any,
) -> None:
    # Validated with the workers' env, as where it is applied would be configured.
    settings.MANTLE = dataclasses.replace(settings.MANTLE, env=workers_env(api))
    content = (CORPUS / f"{name}.yaml").read_text()
    warnings = validate_workflow(content).warnings
    assert [(w.path, w.message.split(" (")[0]) for w in warnings] == WARNINGS.get(name, [])
    inputs, trigger, expected = EXPECTED[name]
    execution = run(apply(content), inputs, trigger)
    assert execution.status == "completed", execution.error
    found = outputs(execution)
    assert {step: found.get(step) for step in expected} == expected
    assert notified == NOTIFIED.get(name, [])


def test_steps_that_read_each_other_run_in_file_order_and_the_rest_in_parallel() -> None:
    spec = parse_workflow((CORPUS / "chained-requests.yaml").read_text())
    assert [(step.name, step.depends_on) for step in spec.steps] == [
        ("get-user", ()),
        ("get-orders", ("get-user",)),
        ("summary", ("get-user", "get-orders")),
    ]
    spec = parse_workflow((CORPUS / "collections.yaml").read_text())
    assert spec.steps[0].depends_on == ()


ENV_PROBE = """
name: env-probe
steps:
  - name: probe
    action: test/echo
    params:
      region: "{{ env.REGION }}"
      names: "{{ env.map(name, name) }}"
      has_database_url: "{{ has(env.DATABASE_URL) || 'DATABASE_URL' in env }}"
      everything: "{{ jsonEncode([env, inputs, trigger, execution]) }}"
  - name: direct
    action: test/echo
    continue_on_error: true
    params: {url: "{{ env.DATABASE_URL }}"}
"""


def test_a_workflow_sees_mantle_env_variables_and_nothing_else_of_the_environment(
    cluster: None, apply: Callable[..., WorkflowDefinition], test_database_url: str
) -> None:
    execution = run(apply(ENV_PROBE))
    assert execution.status == "completed", execution.error
    probe = outputs(execution)["probe"]
    assert isinstance(probe, dict)
    assert probe["region"] == "eu-west-1"
    assert sorted(probe["names"]) == ["API_BASE_URL", "REGION"]
    assert probe["has_database_url"] is False
    assert test_database_url not in probe["everything"]
    assert "postgresql://" not in probe["everything"]
    direct = StepExecution.objects.get(execution=execution, name="direct")
    assert direct.status == "failed"
    assert "no such key 'DATABASE_URL'" in direct.error
