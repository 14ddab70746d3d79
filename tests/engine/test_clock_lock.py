"""The engine clock's session lock after a failover: its connection gone (the server killed or
demoted; here its backend is terminated), the lock reads as lost without a round trip, and the
clock takes it again on a new connection at once instead of ticking on for its span (30 s) while
another process may hold the lock on the new primary."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from core import locks
from engine import clock
from tests.processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)

HOLDER_SQL = """
SELECT pid FROM pg_locks
 WHERE locktype = 'advisory' AND classid = %s AND objid = 0 AND granted
"""


def holder(admin: psycopg.Connection) -> int | None:
    row = admin.execute(HOLDER_SQL, [locks.Namespace.ENGINE_TICKER]).fetchone()
    return row[0] if row else None


def wait_for(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_lock_whose_connection_is_gone_reads_as_lost() -> None:
    with (
        psycopg.connect(database_url(), autocommit=True) as admin,
        locks.session_lock(locks.Namespace.ENGINE_TICKER) as held,
    ):
        assert held and not held.lost()
        admin.execute("SELECT pg_terminate_backend(%s)", [holder(admin)])
        wait_for(held.lost)


def test_the_clock_takes_its_lock_again_at_once_when_its_connection_is_gone() -> None:
    stop = threading.Event()
    ticking = threading.Thread(target=clock.run_forever, args=(stop,))
    ticking.start()
    try:
        with psycopg.connect(database_url(), autocommit=True) as admin:
            wait_for(lambda: holder(admin) is not None)
            first = holder(admin)
            admin.execute("SELECT pg_terminate_backend(%s)", [first])
            # Far less than clock.SPAN: the next tick sees the lock lost and takes it again.
            wait_for(lambda: holder(admin) not in (None, first), seconds=clock.SPAN / 6)
    finally:
        stop.set()
        ticking.join(timeout=10)
