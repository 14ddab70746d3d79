"""The Mantle side of figures 5 and 6: executions submitted to one `mantle serve` with its
defaults, through the service (`admit`) or over HTTP, timed from the first submission to the
last completion recorded in the database (the same machine's clock)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from django.db import connections
from django.db.models import Max

from bench.measure import Measure, max_overlap
from executions.models import TERMINAL, Execution, Status, StepExecution
from executions.services.admission import execution_admit
from teams.models import Team
from teams.services import api_key_create, team_create
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

CLIENTS = 16  # threads submitting
DEADLINE = 120.0  # seconds a scenario may take; past it, what finished is reported
TEAM = "bench-engine"


def workflow(name: str, body: str) -> WorkflowDefinition:
    """The team's workflow `name` with `body` (its top-level keys after the name) as current."""
    team = Team.objects.filter(slug=TEAM).first() or team_create(
        slug=TEAM, max_concurrent_executions=0
    )
    workflow_apply(team=team, content=f"name: {name}\n{body}")
    return WorkflowDefinition.objects.select_related("team", "current_version").get(
        team=team, name=name
    )


def api_key() -> str:
    workflow("noop", NOOP)
    return api_key_create(team=Team.objects.get(slug=TEAM), name="bench-engine")[1]


NOOP = "steps:\n  - name: only\n    action: test/noop\n"


def capacity_yaml(url: str) -> str:
    return (
        "steps:\n  - name: call\n    action: http/request\n"
        f"    params: {{url: '{url}', timeout: 60s}}\n"
    )


def fanout_yaml(branches: int, limit: int, seconds: float) -> str:
    items = ", ".join(str(n) for n in range(branches))
    return (
        "steps:\n  - name: branch\n    action: test/sleep\n"
        f"    for_each: [{items}]\n    max_parallel: {limit}\n    params: {{seconds: {seconds}}}\n"
    )


def limited_yaml(limit: int, seconds: float) -> str:
    return (
        f"max_parallel_executions: {limit}\non_limit: queue\n"
        f"steps:\n  - name: work\n    action: test/sleep\n    params: {{seconds: {seconds}}}\n"
    )


def _in_threads(count: int, submit: Callable[[], None]) -> float:
    """Time of the first submission: `count` calls of `submit` spread over CLIENTS threads,
    each on its own database connection (closed at the end)."""
    shares = [count // CLIENTS + (1 if n < count % CLIENTS else 0) for n in range(CLIENTS)]
    errors: list[BaseException] = []

    def client(share: int) -> None:
        try:
            for _ in range(share):
                submit()
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=client, args=(share,)) for share in shares]
    began = time.time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return began


def _settle(definition: WorkflowDefinition, count: int, began: float) -> Measure:
    """Wait (up to DEADLINE from `began`) for the workflow's executions to end; measure them."""
    executions = Execution.objects.filter(workflow=definition)
    while executions.exclude(status__in=TERMINAL).exists() and time.time() < began + DEADLINE:
        time.sleep(0.2)
    done = executions.filter(status__in=TERMINAL)
    finished = done.count() == count
    last = done.aggregate(last=Max("completed_at"))["last"]
    now = time.time()
    intervals = [
        (started.timestamp(), (completed.timestamp() if completed else now))
        # Rows that run an action: a fan-out step's own row (it holds the items) is `running`
        # for as long as its branches are, and counted it made 100 branches look like 101.
        for started, completed in StepExecution.objects.filter(
            execution__workflow=definition, started_at__isnull=False, items__isnull=True
        ).values_list("started_at", "completed_at")
    ]
    return Measure(
        count=count,
        seconds=(last.timestamp() - began) if finished and last else now - began,
        done=done.count(),
        failed=done.exclude(status=Status.COMPLETED).count(),
        max_running=max_overlap(intervals),
    )


def through_service(definition: WorkflowDefinition, count: int) -> Measure:
    began = _in_threads(count, lambda: execution_admit(team=definition.team, workflow=definition))
    return _settle(definition, count, began)


def over_http(definition: WorkflowDefinition, count: int, *, base: str, key: str) -> Measure:
    address = urlsplit(base)
    local = threading.local()
    body = json.dumps({"inputs": {}})
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def post() -> None:
        if not hasattr(local, "connection"):
            local.connection = http.client.HTTPConnection(address.hostname, address.port)
        local.connection.request("POST", f"/api/v1/run/{definition.name}", body, headers)
        response = local.connection.getresponse()
        answer = response.read()
        if response.status != 202:
            raise RuntimeError(f"POST /api/v1/run: {response.status} {answer[:200]!r}")

    began = _in_threads(count, post)
    return _settle(definition, count, began)


def limited(definition: WorkflowDefinition, count: int) -> Measure:
    """As through_service, with each promoted execution's promotion → running latency."""
    measure = through_service(definition, count)
    latencies = [
        (started - promoted).total_seconds() * 1000
        for promoted, started in Execution.objects.filter(
            workflow=definition, promoted_at__isnull=False, started_at__isnull=False
        ).values_list("promoted_at", "started_at")
    ]
    return Measure(**{**measure.to_json(), "latencies_ms": latencies})
