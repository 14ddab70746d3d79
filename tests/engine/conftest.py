"""Real worker clusters for the engine tests: `python -m django qcluster` subprocesses on the
test database, with short leases and intervals from MANTLE_ENGINE_* variables."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO
from urllib.parse import quote, urlencode

import pytest
from django.conf import settings
from django_q.conf import Conf

from executions import schedules
from executions.admission import admit
from executions.models import TERMINAL, Execution
from teams.models import Team
from teams.services import team_create
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

ROOT = Path(__file__).resolve().parents[2]
ENGINE = {"step_lease": 2.0, "reaper_interval": 0.5, "queue_poll_interval": 1.0}
REDIS_URL = "redis://127.0.0.1:6379/7"


def database_url() -> str:
    """The test database as a URL (the host may be a socket directory: embedded PostgreSQL)."""
    db = settings.DATABASES["default"]
    query = {"host": db["HOST"] or "127.0.0.1", "port": db["PORT"] or "5432", **db["OPTIONS"]}
    password = f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else ""
    return f"postgresql://{quote(db['USER'])}{password}@/{db['NAME']}?{urlencode(query)}"


class Cluster:
    def __init__(self, *, workers: int, broker: str, log: IO[bytes]) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "MANTLE_ENGINE_WORKERS": str(workers),
            "MANTLE_ENGINE_BROKER": broker,
            **{f"MANTLE_ENGINE_{key.upper()}": str(value) for key, value in ENGINE.items()},
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "django", "qcluster"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


@pytest.fixture
def engine(
    transactional_db: None,
    engine_config: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Callable[..., Cluster]]:
    """engine(workers=4, broker="orm"): start a cluster; every cluster stops at teardown.
    Their output is in tmp_path/cluster-<n>.log."""
    engine_config(**ENGINE)
    clusters: list[Cluster] = []

    def start(*, workers: int = 4, broker: str = "orm") -> Cluster:
        if broker != "orm":
            # This process hands work to the same broker as the cluster.
            monkeypatch.setattr(Conf, "ORM", None)
            monkeypatch.setattr(Conf, "REDIS", broker)
        log = (tmp_path / f"cluster-{len(clusters)}.log").open("wb")
        cluster = Cluster(workers=workers, broker=broker, log=log)
        clusters.append(cluster)
        if len(clusters) == 1:
            schedules.start_engine()
        return cluster

    yield start
    for cluster in clusters:
        cluster.stop()


@pytest.fixture
def apply(transactional_db: None) -> Callable[..., WorkflowDefinition]:
    team = team_create(slug=f"t-{uuid.uuid4().hex[:8]}")

    def apply_(content: str) -> WorkflowDefinition:
        return workflow_apply(team=team, content=content).workflow

    return apply_


def run(workflow: WorkflowDefinition, **inputs: object) -> Execution:
    return admit(team=workflow.team, workflow=workflow, inputs=inputs).execution


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
