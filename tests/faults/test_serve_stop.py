"""`mantle serve` stopped while a worker is busy: nothing of it outlives it (its web and worker
children lead process groups of their own, killed after the grace period)."""

from __future__ import annotations

import signal
import time

import pytest
from django.conf import settings

from executions.models import StepExecution
from executions.services.admission import execution_admit
from tests.engine.conftest import wait_for
from tests.processes import alive, descendants
from workflows.services import workflow_apply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LONG = "name: long\nsteps:\n  - name: s\n    action: test/sleep\n    params: {seconds: 600}\n"


def test_serve_stopped_with_a_busy_worker_leaves_no_process_behind(team, serve) -> None:
    workflow = workflow_apply(team=team, content=LONG).workflow
    # Tasks this process hands to the cluster are signed with the secret key.
    server = serve(web_only=False, workers=1, env={"DJANGO_SECRET_KEY": settings.SECRET_KEY})
    execution_admit(team=team, workflow=workflow)
    wait_for(lambda: StepExecution.objects.filter(status="running").exists(), timeout=60)
    processes = descendants(server.process.pid)
    assert len(processes) >= 4  # gunicorn and its worker, qcluster and its processes
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=120)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in processes if alive(pid)] == []
