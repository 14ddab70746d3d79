"""The multi-host fixtures: one network of test hosts and one database host per module (each
test uses teams of its own), app hosts per test; all of it torn down by pid, namespace and link,
also when a test fails."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.multihost import hosts as app_hosts
from tests.multihost import network as netns
from tests.multihost import pgbouncer
from tests.multihost.hosts import AppHost, DatabaseHost
from tests.multihost.network import Host, Network

APP_HOSTS = 3


@dataclass
class Hosts:
    network: Network
    database: DatabaseHost
    apps: list[Host]  # the app hosts' namespaces, empty of processes between tests


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    why = netns.missing() or pgbouncer.missing() or app_hosts.missing()
    if why:
        pytest.skip(why)
    network = Network()
    database: DatabaseHost | None = None
    try:
        database_host = network.add_host("db", 2, front=False)
        apps = [network.add_host(f"app{n}", 10 + n, front=True) for n in range(1, APP_HOSTS + 1)]
        database = DatabaseHost(database_host, pool_size=60)
        database.manage(
            "from django.core.management import call_command\ncall_command('migrate', verbosity=0)"
        )
        yield Hosts(network, database, apps)
    finally:
        if database is not None:
            database.close()
        network.close()


@pytest.fixture
def start_apps(hosts: Hosts) -> Iterator[Callable[..., list[AppHost]]]:
    """start_apps(["web-only", "workers-only", None], **options): `mantle serve` with those
    roles on the first app hosts, started together, ready; every one stopped at teardown."""
    started: list[AppHost] = []

    def start(roles: list[str | None], **options: object) -> list[AppHost]:
        listening = hosts.database.listeners()
        apps = [
            AppHost(host, hosts.database, role=role, **options)  # type: ignore[arg-type]
            for host, role in zip(hosts.apps, roles, strict=False)
        ]
        started.extend(apps)
        deadline = time.monotonic() + 90
        for app in apps:
            app.wait_ready(deadline)
        # Workers are ready when they listen (one step worker per host with workers).
        workers = listening + sum(1 for role in roles if role != "web-only")
        while hosts.database.listeners() < workers:
            exited = [app for app in apps if app.process.poll() is not None]
            if exited or time.monotonic() > deadline:
                logs = "\n".join(
                    f"== {app.host.name}\n{app.log.read_text()[-3000:]}" for app in apps
                )
                raise AssertionError(
                    f"the step workers never listened ({len(exited)} exited)\n{logs}"
                )
            time.sleep(0.2)
        return apps

    yield start
    for app in started:
        app.close()
