"""`mantle serve` with `database.url` through PgBouncer in transaction pooling mode and
`database.direct_url` straight to PostgreSQL: workflows run end to end, and only the sessions a
pooler cannot carry (the step workers' LISTEN, the engine clock's session lock) are direct."""

from __future__ import annotations

import time

import httpx
import psycopg
import pytest

from core import locks
from tests.factories import ApiKeyFactory, workflow_yaml
from tests.multihost.pgbouncer import PgBouncer
from tests.processes import Server
from workflows.services import workflow_apply

pytestmark = [pytest.mark.hosts, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DIRECT = "mantle-direct"
STEPS = (
    "  - name: first\n    action: test/sleep\n    params: {seconds: 1}\n"
    "  - name: second\n    action: test/echo\n    depends_on: [first]\n    params: {n: 1}\n"
)
DIRECT_SESSIONS_SQL = """
SELECT a.application_name, a.query ~ '^(UN)?LISTEN', l.pid IS NOT NULL
  FROM pg_stat_activity a
  LEFT JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.classid = %s
 WHERE a.datname = current_database() AND (a.query ~ '^(UN)?LISTEN' OR l.pid IS NOT NULL)
"""


def wait_completed(server: Server, token: str, ids: list[str], timeout: float = 60) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + timeout
    statuses: list[str] = []
    while time.monotonic() < deadline:
        statuses = [
            httpx.get(f"{server.url}/api/v1/executions/{i}", headers=headers, timeout=5).json()[
                "status"
            ]
            for i in ids
        ]
        if set(statuses) == {"completed"}:
            return
        time.sleep(0.2)
    raise AssertionError(f"not completed: {statuses}\n{server.log.read_text()[-3000:]}")


def test_serve_runs_workflows_through_pgbouncer_with_listen_and_the_clock_direct(
    team, serve, pgbouncer: PgBouncer, test_database_url: str
) -> None:
    workflow_apply(team=team, content=workflow_yaml("pooled", limit=2, steps=STEPS))
    _, token = ApiKeyFactory(team=team)
    database = psycopg.conninfo.conninfo_to_dict(test_database_url)["dbname"]
    before = pgbouncer.transactions()
    server = serve(
        web_only=False,
        env={
            "DATABASE_URL": pgbouncer.url(database),
            "MANTLE_DATABASE_DIRECT_URL": f"{test_database_url}&application_name={DIRECT}",
        },
    )
    headers = {"Authorization": f"Bearer {token}"}
    answers = [
        httpx.post(f"{server.url}/api/v1/run/pooled", headers=headers, json={}, timeout=10)
        for _ in range(6)
    ]
    assert [a.status_code for a in answers] == [202] * 6
    assert [a.json()["status"] for a in answers].count("queued") == 4
    wait_completed(server, token, [a.json()["execution_id"] for a in answers])

    with psycopg.connect(test_database_url, autocommit=True) as admin:
        sessions = admin.execute(DIRECT_SESSIONS_SQL, [locks.Namespace.ENGINE_TICKER]).fetchall()
    # The two step workers' listening connections (only the claimer's LISTENs; the other has
    # UNLISTENed, engine/listener.py), one clock holding its lock: all on direct connections.
    assert sorted(sessions) == [(DIRECT, False, True), (DIRECT, True, False), (DIRECT, True, False)]
    assert pgbouncer.transactions() - before > 50
