"""Replay over real HTTP against a real `mantle serve` with its workers (docs/operations.md,
Replaying after an incident): a failed execution replayed from its failed step reuses the
completed steps' outputs (copied, not run again) and runs the failed step under the latest
version; a version that changed a completed step is refused; an Idempotency-Key is honoured;
the replay goes through the workflow's limit."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from executions.models import Execution, StepExecution
from tests.engine.conftest import wait_for
from tests.factories import ApiKeyFactory
from tests.processes import Server

FLOW = """
name: ship
max_parallel_executions: {limit}
inputs:
  n: {{type: number}}
steps:
  - name: build
    action: test/echo
    params: {{artifact: "{{{{ inputs.n * 10 }}}}"}}
  - name: upload
    action: {upload}
    params: {{message: broken uploader, got: "{{{{ steps.build.output.artifact }}}}"}}
    depends_on: [build]
  - name: notify
    action: test/echo
    params: {{sent: "{{{{ steps.upload.output.got }}}}"}}
    depends_on: [upload]
"""


def flow(*, upload: str = "test/fail", limit: int = 0, build: str = "test/echo") -> str:
    text = FLOW.format(upload=upload, limit=limit)
    return text.replace("action: test/echo", f"action: {build}", 1)


def final(client: httpx.Client, execution_id: str) -> dict[str, object]:
    def done() -> dict[str, object] | None:
        body = client.get(f"/api/v1/executions/{execution_id}").json()
        return body if body["status"] in {"completed", "failed", "cancelled"} else None

    return wait_for(done, timeout=60)  # type: ignore[return-value]


def test_a_replay_from_the_failed_step_reuses_outputs_and_runs_the_fixed_step(
    serve: Callable[..., Server], team: object
) -> None:
    _, key = ApiKeyFactory(team=team)
    server = serve(web_only=False, workers=1)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/yaml"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        assert client.put("/api/v1/workflows/ship", content=flow()).status_code == 201
        run = client.post("/api/v1/run/ship", json={"inputs": {"n": 4}}).json()
        failed = final(client, run["execution_id"])
        assert failed["status"] == "failed", failed

        # A fixed uploader; the build step as it was.
        fixed = flow(upload="test/echo")
        assert client.put("/api/v1/workflows/ship", content=fixed).json()["version"] == 2
        body = {"version": "latest", "from": "failed_step"}
        replayed = client.post(
            f"/api/v1/executions/{run['execution_id']}/replay",
            json=body,
            headers={"Idempotency-Key": "after-outage-1"},
        )
        assert replayed.status_code == 202, replayed.text
        replay = replayed.json()
        assert (replay["replay_of"], replay["reused_steps"], replay["version"]) == (
            run["execution_id"],
            1,
            2,
        )
        again = client.post(
            f"/api/v1/executions/{run['execution_id']}/replay",
            json=body,
            headers={"Idempotency-Key": "after-outage-1"},
        )
        assert (again.status_code, again.json()["execution_id"]) == (200, replay["execution_id"])

        done = final(client, replay["execution_id"])
        assert done["status"] == "completed", done
        assert done["replay_of"] == run["execution_id"]
        original = client.get(f"/api/v1/executions/{run['execution_id']}").json()
        assert original["replays"] == [replay["execution_id"]]

        steps = {s["name"]: s for s in done["steps"]}  # type: ignore[index]
        first = {s["name"]: s for s in original["steps"]}  # type: ignore[index]
        # The build step was copied (its first run's times), not run again.
        assert steps["build"]["output"] == first["build"]["output"] == {"artifact": 40}
        assert steps["build"]["started_at"] == first["build"]["started_at"]
        assert steps["upload"]["output"]["got"] == 40
        assert steps["notify"]["output"] == {"sent": 40}
        assert Execution.objects.filter(replay_of_id=run["execution_id"]).count() == 1

        # A version that changes the completed build step is refused, nothing written.
        changed = flow(upload="test/echo", build="test/noop")
        assert client.put("/api/v1/workflows/ship", content=changed).json()["version"] == 3
        refused = client.post(f"/api/v1/executions/{run['execution_id']}/replay", json=body)
        assert refused.status_code == 409
        assert (refused.json()["error"], refused.json()["steps"]) == ("version_changed", ["build"])
        # The same version is still replayable from its failed step, and fails again there.
        same = client.post(
            f"/api/v1/executions/{run['execution_id']}/replay", json={"from": "failed_step"}
        ).json()
        assert (same["version"], same["reused_steps"]) == (1, 1)
        assert final(client, same["execution_id"])["status"] == "failed"
        build_runs = StepExecution.objects.filter(
            execution_id=same["execution_id"], name="build"
        ).values_list("started_at", flat=True)
        assert list(build_runs) == [
            StepExecution.objects.get(execution_id=run["execution_id"], name="build").started_at
        ]
