"""The step worker's LISTEN connection on the work channel (engine/worker.py): read on the event
loop, and only while armed."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
from django.db import DatabaseError

from core import locks
from executions.sql import WORK_CHANNEL

logger = logging.getLogger(__name__)


class Listener:
    """LISTEN on the work channel, read on the event loop, and only while armed: the claim loop
    arms it as a claim begins, and the first notification then disarms it and wakes the loop.
    Disarmed, it reads nothing: every notification goes to every worker (10 in a default serve),
    and a listener thread reading each as it came cost a tenth of the CPU of a no-op
    execution. Arming drops what came meanwhile: it was committed before the claim about to
    begin, which sees that work."""

    def __init__(self, wake: asyncio.Event) -> None:
        self.wake = wake
        self.connection: psycopg.Connection[Any] | None = None
        self.socket = -1  # the connection's, read while armed
        self.armed = False
        self.reopening: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Connect and LISTEN (again after a loss), retrying each second until it can."""
        while self.connection is None:
            try:
                self.connection = await asyncio.to_thread(locks.listen, WORK_CHANNEL)
                self.socket = self._pgconn().socket
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
        if self.connection is not None:
            self._read()

    def close(self) -> None:
        if self.connection is not None:
            asyncio.get_running_loop().remove_reader(self.socket)
            self.connection.close()
            self.connection = None

    def _pgconn(self) -> psycopg.pq.abc.PGconn:
        assert self.connection is not None
        return self.connection.pgconn

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
            logger.warning("listener lost its connection; reconnecting", exc_info=True)
            self.close()
            self.reopening = asyncio.get_running_loop().create_task(self.open())
            return True
        came = False
        while pgconn.notifies() is not None:
            came = True
        return came
