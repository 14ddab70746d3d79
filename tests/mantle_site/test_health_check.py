"""The database health check between requests (mantle_site.postgresql): a connection the server
closed is replaced before the next request uses it; a healthy one is kept."""

from __future__ import annotations

import select
import time

import psycopg
from django.db import close_old_connections, connection


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_healthy_connection_is_kept_across_requests(test_database_url: str) -> None:
    before = _backend_pid()
    close_old_connections()  # the end of one request and the start of the next
    assert _backend_pid() == before


def test_a_connection_the_server_closed_is_replaced_before_the_next_request(
    test_database_url: str,
) -> None:
    before = _backend_pid()
    with psycopg.connect(test_database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [before])
    # The server's goodbye reaches the idle socket shortly after.
    deadline = time.monotonic() + 10
    while not select.select([connection.connection.fileno()], [], [], 0.1)[0]:
        assert time.monotonic() < deadline, "the terminated connection's socket never woke up"
    close_old_connections()
    after = _backend_pid()
    assert after != before
