"""The OpenAPI schema (drf-spectacular) and a schemathesis run against it: no generated request,
valid or not, may get a 5xx."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

from executions.services.admission import execution_admit
from mantle_site.wsgi import application
from tests.api.conftest import hook_yaml
from tests.factories import ApiKeyFactory
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db


@pytest.fixture
def in_test_transaction() -> Iterator[None]:
    """The WSGI app would close the test's connection at the end of every request; Django's test
    client prevents it the same way (and reconnects the receivers after each of its requests, so
    no test client may be used while this fixture is active)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


EXAMPLES_PER_OPERATION = 20


def test_the_schema_is_openapi_3_with_every_endpoint(client):
    response = client.get("/api/schema/", headers={"Accept": "application/json"})
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) >= {
        "/api/v1/run/{workflow}",
        "/hooks/{hook}",
        "/api/v1/executions",
        "/api/v1/executions/{execution_id}",
        "/api/v1/executions/{execution_id}/cancel",
        "/api/v1/workflows",
        "/api/v1/workflows/{name}",
        "/api/v1/queues",
        "/healthz",
        "/readyz",
    }


@pytest.mark.parametrize(
    "mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
)
def test_no_generated_request_gets_a_5xx(team, mode, in_test_transaction):
    workflow = workflow_apply(team=team, content=hook_yaml("deploy", "/hooks/deploy", limit=1))
    execution_admit(team=team, workflow=workflow.workflow)
    _, key = ApiKeyFactory(team=team)
    headers = {"Authorization": f"Bearer {key}"}
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
    server_errors: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10

    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def call(case: schemathesis.Case) -> None:
            response = case.call(headers=headers)
            if response.status_code >= 500:
                server_errors.append(
                    f"{case.method} {case.path} → {response.status_code} {response.text[:300]}"
                )

        with contextlib.suppress(Unsatisfiable):  # nothing to make invalid (e.g. GET /healthz)
            call()
    assert server_errors == []
