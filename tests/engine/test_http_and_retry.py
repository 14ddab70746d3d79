from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator

import pytest
from django.utils import timezone

from executions.models import StepExecution
from executions.services.lifecycle import execution_cancel
from tests.engine.conftest import run, wait_for, wait_terminal
from tests.servers import Handler, local, serving
from workflows.models import WorkflowDefinition


class Api(Handler):
    hits: dict[str, int] = {}

    def do_POST(self) -> None:
        body = self.body()
        Api.hits[self.path] = Api.hits.get(self.path, 0) + 1
        if self.path == "/slow":
            time.sleep(10)
            self.reply(200, {})
        elif self.path == "/flaky" and Api.hits[self.path] == 1:
            self.reply(503, {"error": "try again"})
        elif self.path == "/missing":
            self.reply(404, {"error": "no such thing"})
        else:
            self.reply(200, {"got": json.loads(body), "auth": self.headers["X-Token"]})


@pytest.fixture
def server() -> Iterator[str]:
    Api.hits = {}
    with serving(local(Api)) as url:
        yield url


def request_workflow(url: str, *, retry: str = "") -> str:
    return f"""
name: call
inputs:
  name: {{type: string, default: mantle}}
steps:
  - name: call
    action: http/request
    {retry}
    params:
      method: POST
      url: "{url}"
      headers: {{X-Token: "t-{{{{ inputs.name }}}}"}}
      body: {{name: "{{{{ inputs.name }}}}"}}
      timeout: 5s
"""


def test_it_posts_json_and_keeps_the_response(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition], server: str
) -> None:
    engine()
    execution = wait_terminal(run(apply(request_workflow(f"{server}/ok"))))
    assert execution.status == "completed", execution.error
    output = StepExecution.objects.get(execution=execution).output
    assert output["status"] == 200
    assert output["json"] == {"got": {"name": "mantle"}, "auth": "t-mantle"}
    assert output["headers"]["content-type"] == "application/json"


def test_a_4xx_fails_the_step_with_the_response_kept(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition], server: str
) -> None:
    engine()
    execution = wait_terminal(run(apply(request_workflow(f"{server}/missing"))))
    step = StepExecution.objects.get(execution=execution)
    assert (execution.status, step.status) == ("failed", "failed")
    assert step.error.endswith("/missing: HTTP 404 Not Found")
    assert step.output["json"] == {"error": "no such thing"}


def test_a_connection_error_says_so(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine()
    execution = wait_terminal(run(apply(request_workflow(f"http://127.0.0.1:{port}/x"))))
    step = StepExecution.objects.get(execution=execution)
    assert step.status == "failed"
    assert f"POST http://127.0.0.1:{port}/x: connection failed:" in step.error


def test_a_failed_attempt_is_retried_after_the_backoff_and_then_succeeds(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition], server: str
) -> None:
    engine()
    retry = "retry: {max_attempts: 3, backoff: exponential}"
    execution = wait_terminal(run(apply(request_workflow(f"{server}/flaky", retry=retry))))
    step = StepExecution.objects.get(execution=execution)
    assert execution.status == "completed", execution.error
    assert (step.status, step.attempt, step.output["status"]) == ("completed", 2, 200)
    assert Api.hits["/flaky"] == 2


def test_cancelling_abandons_a_request_in_flight(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition], server: str
) -> None:
    engine()
    execution = run(
        apply(request_workflow(f"{server}/slow").replace("timeout: 5s", "timeout: 20s"))
    )
    wait_for(lambda: Api.hits.get("/slow"))  # the request is at the server
    cancelled_at = timezone.now()
    execution_cancel(execution.id)
    step = wait_for(
        lambda: StepExecution.objects.filter(execution=execution, status="cancelled").first(),
        timeout=5,
    )
    assert (step.completed_at - cancelled_at).total_seconds() <= 1.5  # not the server's 10 s
    assert wait_terminal(execution).status == "cancelled"


def test_an_egress_refusal_fails_the_step_at_once_without_a_retry(
    engine: Callable[..., object], apply: Callable[..., WorkflowDefinition]
) -> None:
    # 10.0.0.1 is refused by the default policy before any connection (tests/engine/test_egress.py).
    engine()
    retry = "retry: {max_attempts: 3, backoff: fixed}"
    execution = wait_terminal(run(apply(request_workflow("http://10.0.0.1/x", retry=retry))))
    step = StepExecution.objects.get(execution=execution)
    assert (execution.status, step.status, step.attempt) == ("failed", "failed", 1)
    assert "refused" in step.error
    assert "private, loopback, link-local or reserved" in step.error
