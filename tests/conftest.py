from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from django_q.conf import Conf

from engine import clock
from teams.models import Team
from tests.factories import TeamFactory, UserFactory, WorkflowFactory
from tests.multihost import pgbouncer as pgbouncer_binary
from tests.multihost.pgbouncer import PgBouncer
from tests.processes import ENGINE, Cluster, Server, database_url
from workflows.models import WorkflowDefinition


@pytest.fixture
def mantle_config() -> Iterator[Callable[..., None]]:
    """Override keys of one section of the config for one test:
    mantle_config("engine", step_lease=1.0), mantle_config("limits", fanout_items=5000)."""
    original = settings.MANTLE

    def override(section: str, **values: object) -> None:
        current = settings.MANTLE
        replaced = dataclasses.replace(getattr(current, section), **values)
        settings.MANTLE = dataclasses.replace(current, **{section: replaced})

    yield override
    settings.MANTLE = original


@pytest.fixture(autouse=True)
def default_team_limit_is_unlimited(mantle_config: Callable[..., None]) -> None:
    """Tests do not depend on the ./mantle.yaml they happen to run beside (its default is 50)."""
    mantle_config("engine", max_concurrent_executions_per_team=0)


@pytest.fixture
def test_database_url(transactional_db: None) -> str:
    """A URL of the test database, for subprocesses (`mantle …`, qcluster, gunicorn) to use as
    DATABASE_URL. Only committed data is visible to them, hence transactional_db."""
    return database_url()


@pytest.fixture
def engine(
    transactional_db: None,
    mantle_config: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Callable[..., Cluster]]:
    """engine(workers=2, slots=100, broker="orm", env=None): start the workers (`mantle serve
    --workers-only`: `workers` step-worker processes of `slots` slots) on the test database
    (leases and intervals of tests.processes.ENGINE); every cluster stops at teardown. Their
    output is in tmp_path/cluster-<n>.log."""
    mantle_config("engine", **ENGINE)
    clusters: list[Cluster] = []

    def start(
        *,
        workers: int = 2,
        slots: int = 100,
        broker: str = "orm",
        env: dict[str, str] | None = None,
    ) -> Cluster:
        if broker != "orm":
            # This process hands work to the same broker as the cluster.
            monkeypatch.setattr(Conf, "ORM", None)
            monkeypatch.setattr(Conf, "REDIS", broker)
        log = tmp_path / f"cluster-{len(clusters)}.log"
        cluster = Cluster(workers=workers, slots=slots, broker=broker, log=log, env=env)
        clusters.append(cluster)
        return cluster

    yield start
    for cluster in clusters:
        cluster.stop()


@pytest.fixture
def serve(tmp_path: Path, test_database_url: str) -> Iterator[Callable[..., Server]]:
    """serve(web_only=True, workers=4): a real `mantle serve` on the test database and a free
    local port, ready; stopped at teardown."""
    servers: list[Server] = []

    def start(
        *, web_only: bool = True, workers: int = 4, env: dict[str, str] | None = None
    ) -> Server:
        server = Server(
            tmp_path, database_url=test_database_url, web_only=web_only, workers=workers, env=env
        )
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def pgbouncer(test_database_url: str) -> Iterator[PgBouncer]:
    """PgBouncer in transaction pooling mode (4 server connections) in front of the test
    database's server, on a free local port; `.url(name)` reaches a database through it."""
    missing = pgbouncer_binary.missing()
    if missing:
        pytest.skip(missing)
    db = settings.DATABASES["default"]
    bouncer = PgBouncer.in_front_of(db["HOST"] or "127.0.0.1", db["PORT"] or 5432)
    yield bouncer
    bouncer.stop()


@pytest.fixture
def make_team(db: None) -> Callable[..., Team]:
    def make(slug: str | None = None, max_concurrent_executions: int | None = None) -> Team:
        if slug is None:
            return TeamFactory(max_concurrent_executions=max_concurrent_executions)
        return TeamFactory(slug=slug, max_concurrent_executions=max_concurrent_executions)

    return make


@pytest.fixture
def team(make_team: Callable[..., Team]) -> Team:
    return make_team("acme")


@pytest.fixture
def make_workflow(db: None) -> Callable[..., WorkflowDefinition]:
    def make(team: Team, name: str = "deploy", **kwargs: object) -> WorkflowDefinition:
        return WorkflowFactory(team=team, name=name, **kwargs)

    return make


@pytest.fixture
def make_user(db: None) -> Callable[..., User]:
    def make(username: str, *, staff: bool = False, teams: tuple[Team, ...] = ()) -> User:
        return UserFactory(username=username, is_staff=staff, is_superuser=staff, teams=teams)

    return make


@pytest.fixture
def admin_client(client: Client, make_user: Callable[..., User]) -> Client:
    """Django's test client signed in as a superuser."""
    client.force_login(make_user("root", staff=True))
    return client


@pytest.fixture
def engine_clock() -> Iterator[None]:
    """The real engine clock, ticking in a thread on connections of its own."""
    stop = threading.Event()
    ticker = threading.Thread(
        target=lambda: (clock.run_forever(stop), connections.close_all()), daemon=True
    )
    ticker.start()
    yield
    stop.set()
    ticker.join(timeout=10)
