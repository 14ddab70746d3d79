"""The step worker's connection that LISTENs on the work channel (engine/worker.py): read on
the event loop, only while armed, and listening only while its worker holds the claimer role."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
from django.db import DatabaseError

from core import locks
from executions.sql import WORK_CHANNEL

logger = logging.getLogger(__name__)

_LISTEN = f"LISTEN {WORK_CHANNEL}".encode()
_UNLISTEN = f"UNLISTEN {WORK_CHANNEL}".encode()


class Listener:
    """LISTEN on the work channel, read on the event loop, and only while armed: the claim loop
    arms it as a claim begins, and the first notification then disarms it and wakes the loop.
    Disarmed, it reads nothing. Only the claimer listens: a worker that does not hold the role
    UNLISTENs, and LISTENs again when it arms, before its first claim as claimer (what commits
    after the LISTEN notifies it, what committed before is seen by that claim). PostgreSQL
    signals every listening backend of each notification; with the 10 workers of a default
    serve all listening, that delivery and the reading cost about a third of the CPU of a no-op
    execution (docs/performance.md, CPU per execution). Arming drops what came meanwhile: it was
    committed before the claim about to begin, which sees that work."""

    def __init__(self, wake: asyncio.Event) -> None:
        self.wake = wake
        self.connection: psycopg.Connection[Any] | None = None
        self.socket = -1  # the connection's, read while armed
        self.armed = False
        self.listening = False  # LISTEN in force on the connection
        self.reopening: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Connect and LISTEN (again after a loss), retrying each second until it can."""
        while self.connection is None:
            try:
                self.connection = await asyncio.to_thread(locks.listen, WORK_CHANNEL)
                self.socket = self._pgconn().socket
                self.listening = True
            except DatabaseError:
                logger.warning("listener cannot connect; retrying", exc_info=True)
                await asyncio.sleep(1.0)
        if self.armed:
            self._watch()
        self.wake.set()  # work may have been announced while no one listened

    def arm(self) -> None:
        if self.armed:
            return
        self.armed = True
        if self.connection is not None and not self.listening:
            self._command(_LISTEN, listening=True)
        if self.connection is not None:
            self._read()  # what came meanwhile: dropped
        if self.connection is not None:
            self._watch()

    def drain(self) -> None:
        """Disarmed: read what came and drop it (a worker that is not the claimer still reads
        its notifications, or they would fill the connection and hold PostgreSQL's queue)."""
        if self.armed:
            self.armed = False
            if self.connection is not None:
                asyncio.get_running_loop().remove_reader(self.socket)
        if self.connection is not None and self.listening:
            self._command(_UNLISTEN, listening=False)
        if self.connection is not None:
            self._read()

    def close(self) -> None:
        if self.connection is not None:
            asyncio.get_running_loop().remove_reader(self.socket)
            self.connection.close()
            self.connection = None
            self.listening = False

    def _pgconn(self) -> psycopg.pq.abc.PGconn:
        assert self.connection is not None
        return self.connection.pgconn

    def _command(self, sql: bytes, *, listening: bool) -> None:
        """LISTEN or UNLISTEN (one round trip, on the event loop: only when the role changes
        hands); a lost connection is opened afresh, listening, as in `_read`."""
        assert self.connection is not None
        try:
            self.connection.execute(sql)
        except psycopg.OperationalError:
            self._lost()
            return
        self.listening = listening

    def _lost(self) -> None:
        logger.warning("listener lost its connection; reconnecting", exc_info=True)
        self.close()
        self.reopening = asyncio.get_running_loop().create_task(self.open())

    def _watch(self) -> None:
        asyncio.get_running_loop().add_reader(self.socket, self._readable)

    def _readable(self) -> None:
        if self._read():
            self.armed = False
            if self.connection is not None:
                asyncio.get_running_loop().remove_reader(self.socket)
            self.wake.set()

    def _read(self) -> bool:
        """Read what arrived, dropping the notifications: whether any came (or the connection
        was lost: then the claim loop claims while a new connection opens)."""
        pgconn = self._pgconn()
        try:
            pgconn.consume_input()
        except psycopg.OperationalError:
            self._lost()
            return True
        came = False
        while pgconn.notifies() is not None:
            came = True
        return came
