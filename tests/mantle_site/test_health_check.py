"""The database health check between requests (mantle_site.postgresql): a connection the server
closed is replaced before the next request uses it; a healthy one is kept."""

from __future__ import annotations

import os
import select
import socket
import time

import psycopg
import pytest
from django.db import close_old_connections, connection

from mantle_site.settings import _database


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


def test_a_dead_link_is_found_in_seconds_unless_the_url_says_otherwise(db: None) -> None:
    connection.ensure_connection()
    # A duplicate of the connection's descriptor: the family is read from the socket itself.
    with socket.socket(fileno=os.dup(connection.connection.fileno())) as sock:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            pytest.skip("a Unix socket (the embedded PostgreSQL) has no TCP options")
        options = {
            name: sock.getsockopt(socket.IPPROTO_TCP, getattr(socket, name))
            for name in ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT", "TCP_USER_TIMEOUT")
        }
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    assert options == {
        "TCP_KEEPIDLE": 5,
        "TCP_KEEPINTVL": 2,
        "TCP_KEEPCNT": 3,
        "TCP_USER_TIMEOUT": 10000,
    }
    given = _database("postgresql://mantle@db.example/mantle?keepalives_idle=1")["OPTIONS"]
    assert given["keepalives_idle"] == "1"
    assert given["keepalives_count"] == "3"
