"""The web worker of `mantle serve`: gunicorn's sync worker, but a request is read whole before a
process is given to it (docs/hostile-input.md, Slow clients).

gunicorn's sync worker accepts a connection and then reads it, blocking: twelve clients sending
one header line every two seconds held every web worker, and `/healthz` went unanswered. Here
each worker reads every connection it accepted at once, without blocking (one selector, as
nginx buffers a request before its upstream sees it), and serves a request only when its head
and its body (by Content-Length, or to the end of a chunked body) are all in: a slow client
costs a file descriptor and a buffer, never a process. A request not read whole within
`server.read_timeout` is answered 408 and closed. Serving stays synchronous, so gunicorn's
`timeout` still stops a request that runs too long (gunicorn_conf: 503 request_timeout).

A worker accepts one connection at a time, and none while one of its connections is arriving
(accepted, or sent bytes, within IN_FLIGHT): a request it took must not wait behind a long one
it is about to serve (four 1 MiB uploads accepted by one worker kept `/healthz`, accepted by
the same worker meanwhile, waiting while another worker was idle). A slow client is arriving
only for IN_FLIGHT after each of its lines.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket
import time
from typing import Any

from django.conf import settings
from gunicorn import util
from gunicorn.workers.sync import SyncWorker

# What one connection may send before it is served: a head beyond this is handed to gunicorn's
# parser, whose limits answer it (414, 431); a body beyond the upload cap is handed to the app,
# which answers 413 without reading it.
_HEAD_MAX = 64 * 1024
IN_FLIGHT = 0.05  # seconds
_CHUNKED_END = b"0\r\n\r\n"


class _Reading:
    """A connection being read: its bytes so far, and when it must be whole."""

    def __init__(self, client: socket.socket, addr: Any, listener: socket.socket) -> None:
        self.client, self.addr, self.listener = client, addr, listener
        self.data = bytearray()
        self.last = time.monotonic()  # when it was accepted or last sent bytes
        self.deadline = self.last + settings.MANTLE.server.read_timeout

    def whole(self) -> bool:
        """Whether the request is in (or enough of it for gunicorn's parser to answer)."""
        end = self.data.find(b"\r\n\r\n")
        if end < 0:
            return len(self.data) > _HEAD_MAX
        length, chunked = _framing(bytes(self.data[:end]))
        body = len(self.data) - end - 4
        cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if chunked:
            return body > cap + _HEAD_MAX or self.data.endswith(_CHUNKED_END)
        return length is None or body >= length or length > cap


def _framing(head: bytes) -> tuple[int | None, bool]:
    """The head's Content-Length (None when absent or unreadable: the parser answers it) and
    whether its body is chunked."""
    length, chunked = None, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    return length, chunked


class _Prefilled:
    """The client socket, whose reads return the bytes read ahead first (gunicorn's parser and
    gunicorn_conf's close read through it); everything else is the socket's."""

    def __init__(self, sock: socket.socket, data: bytes) -> None:
        self._sock = sock
        self._data = data

    def recv(self, size: int, flags: int = 0) -> bytes:
        if not self._data and flags & socket.MSG_DONTWAIT:
            # A socket with a timeout polls before it reads, MSG_DONTWAIT or not.
            timeout = self._sock.gettimeout()
            self._sock.setblocking(False)
            try:
                return self._sock.recv(size, flags)
            finally:
                self._sock.settimeout(timeout)
        if not self._data:
            return self._sock.recv(size, flags)
        chunk = self._data[:size]
        if not flags & socket.MSG_PEEK:
            self._data = self._data[size:]
        return chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class ReadingSyncWorker(SyncWorker):
    def run(self) -> None:
        if self.cfg.is_ssl:  # TLS records cannot be read ahead this way: gunicorn's own loop
            super().run()
            return
        self.selector = selectors.DefaultSelector()
        self.reading: dict[int, _Reading] = {}
        for listener in self.sockets:
            listener.setblocking(False)
        self.accepting = False
        # Signals write a byte here (gunicorn's wake-up fd): read, so that they wake the loop.
        self.selector.register(self.PIPE[0], selectors.EVENT_READ, "signal")
        try:
            while self.alive:
                self.notify()
                now = time.monotonic()
                arriving = [r.last + IN_FLIGHT for r in self.reading.values()]
                self._accept_when(all(until <= now for until in arriving))
                for key, _ in self.selector.select(self._wait(now, arriving)):
                    if key.data == "accept":
                        self._accept(key.fileobj)  # type: ignore[arg-type]
                    elif key.data == "signal":
                        with contextlib.suppress(OSError):
                            os.read(self.PIPE[0], 4096)
                    else:
                        self._read(key.data)
                self._expire()
                if not self.is_parent_alive():
                    break
        finally:
            for reading in list(self.reading.values()):
                self._forget(reading)
                util.close(reading.client)
            self.selector.close()

    def _wait(self, now: float, arriving: list[float]) -> float:
        """Seconds until the next deadline, or the end of an arrival (at most one)."""
        times = [r.deadline for r in self.reading.values()] + [t for t in arriving if t > now]
        return min(max(min(times, default=now + 1.0) - now, 0.0), 1.0)

    def _accept_when(self, accepting: bool) -> None:
        if accepting == self.accepting:
            return
        for listener in self.sockets:
            if accepting:
                self.selector.register(listener, selectors.EVENT_READ, "accept")
            else:
                self.selector.unregister(listener)
        self.accepting = accepting

    def _accept(self, listener: socket.socket) -> None:
        try:
            client, addr = listener.accept()
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNABORTED):
                return
            raise
        client.setblocking(False)
        util.close_on_exec(client)
        reading = self.reading[client.fileno()] = _Reading(client, addr, listener)
        self.selector.register(client, selectors.EVENT_READ, reading)
        self._accept_when(False)  # it is arriving
        self._read(reading)  # its request may be in already

    def _read(self, reading: _Reading) -> None:
        try:
            chunk = reading.client.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:  # the client left before its request was whole
            self._forget(reading)
            util.close(reading.client)
            return
        reading.data += chunk
        reading.last = time.monotonic()
        if reading.whole():
            self._forget(reading)
            self._serve(reading)

    def _serve(self, reading: _Reading) -> None:
        """gunicorn's sync handling of the request read, on a blocking socket whose reads are
        still bounded (a body the check above took for whole, wrongly, waits no longer)."""
        client = reading.client
        client.setblocking(True)
        client.settimeout(settings.MANTLE.server.read_timeout)
        self.handle(reading.listener, _Prefilled(client, bytes(reading.data)), reading.addr)  # type: ignore[arg-type]

    def _expire(self) -> None:
        now = time.monotonic()
        for reading in [r for r in self.reading.values() if r.deadline <= now]:
            self._forget(reading)
            timeout = settings.MANTLE.server.read_timeout
            with contextlib.suppress(OSError):  # a client that reads nothing gets nothing
                util.write_error(
                    reading.client,
                    408,
                    "Request Timeout",
                    f"the request was not received whole within {timeout:g}s",
                )
            util.close(reading.client)

    def _forget(self, reading: _Reading) -> None:
        self.selector.unregister(reading.client)
        del self.reading[reading.client.fileno()]
