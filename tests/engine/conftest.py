"""Helpers of the engine tests. Their worker clusters come from the `engine` fixture
(tests/conftest.py): `python -m django qcluster` subprocesses on the test database, with short
leases and intervals from MANTLE_ENGINE_* variables."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from executions.models import TERMINAL, Execution
from executions.services.admission import execution_admit
from teams.models import Team
from teams.services import team_create
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply


@pytest.fixture
def apply(transactional_db: None) -> Callable[..., WorkflowDefinition]:
    team = team_create(slug=f"t-{uuid.uuid4().hex[:8]}")

    def apply_(content: str) -> WorkflowDefinition:
        return workflow_apply(team=team, content=content).workflow

    return apply_


def run(workflow: WorkflowDefinition, **inputs: object) -> Execution:
    return execution_admit(team=workflow.team, workflow=workflow, inputs=inputs).execution


def wait_for(
    predicate: Callable[[], object], *, timeout: float = 20.0, interval: float = 0.05
) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"not true within {timeout}s: {predicate}")


def wait_terminal(execution: Execution, *, timeout: float = 20.0) -> Execution:
    def done() -> Execution | None:
        execution.refresh_from_db()
        return execution if execution.status in TERMINAL else None

    wait_for(done, timeout=timeout)
    return execution


def team_of(workflow: WorkflowDefinition) -> Team:
    return workflow.team
