"""gunicorn settings of `mantle serve` (`-c python:mantle_site.gunicorn_conf`).

Bind, workers, threads and the access log come from the command line (server.*).
"""

from __future__ import annotations

import json
import os
import socket
import weakref
from typing import Any

from gunicorn import util
from gunicorn.http.body import LengthReader

wsgi_app = "mantle_site.wsgi"
# The app is imported once, in the master, and the workers fork from it: N workers importing
# Django at once on a loaded machine took 28-42 s to answer (13 workers, 2 cores), forks take
# none.
preload_app = True
timeout = 30
graceful_timeout = 10
# The largest request line and header gunicorn accepts; beyond them it answers 414 and 431
# itself (in JSON, below), before Django sees the request.
limit_request_line = 8190
limit_request_field_size = 8190
# One default path per user (~/.gunicorn/gunicorn.ctl) would be fought over by every `mantle
# serve` on the machine (split roles, tests); Mantle does not use the control interface.
control_socket_disable = True

_stopped_after: int | None = None  # seconds, in a worker the arbiter stopped at `timeout`


def pre_fork(server: Any, worker: Any) -> None:
    # With preload_app, a database connection the master opened would be shared by every worker.
    from django.db import connections

    connections.close_all()


def child_exit(server: Any, worker: Any) -> None:
    # prometheus_client's multiprocess bookkeeping for a worker that exited (its live gauges).
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


# Connections whose request gunicorn read to its last byte (its Content-Length, or no body).
_read_whole: weakref.WeakSet[socket.socket] = weakref.WeakSet()


def post_request(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    reader = req.body.reader if req.body is not None else None
    if isinstance(reader, LengthReader) and reader.length == 0:
        _read_whole.add(req.unreader.sock)
    else:
        _read_whole.discard(req.unreader.sock)


def _close(sock: socket.socket, timeout: float = 2.0, max_drain: int = 65536) -> None:
    """Close a connection after its response: at once when the client has nothing left to send,
    else as gunicorn does (util.close_graceful: FIN, then read until the client's FIN, up to
    2 s, so that request bytes left unread do not turn the close into a reset that can truncate
    the response, RFC 9112 §9.6). A sync worker serves nothing while it waits for that FIN: a
    fifth of each web worker's time in figure 2 (py-spy), one sleep and wake-up per request. As
    nginx's lingering_close, it lingers only when the client may still be sending: its request
    was not read whole, or more bytes are already waiting. A client that sent a whole request
    waits for the answer, which says `Connection: close`, and sends nothing more."""
    if sock in _read_whole and not _waiting(sock):
        _read_whole.discard(sock)
        sock.close()
    else:
        _close_graceful(sock, timeout, max_drain)


def _waiting(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False
    except (OSError, ValueError):  # broken, or TLS (no MSG_PEEK): closed as gunicorn does
        return True


def worker_abort(worker: Any) -> None:
    # In the worker the arbiter stops for running a request past `timeout` (SIGABRT): the
    # request in flight is answered by write_error below, as a timeout.
    global _stopped_after
    _stopped_after = worker.cfg.timeout


def _write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's own answers (a request line or headers over its limits, malformed HTTP, a
    request stopped at `timeout`) in the API's JSON error shape, not gunicorn's HTML page."""
    if status_int == 500 and _stopped_after is not None:
        status_int, reason = 503, "Service Unavailable"
        code = "request_timeout"
        mesg = f"the request ran longer than {_stopped_after}s and was stopped"
    else:
        code = reason.lower().replace(" ", "_")
    body = json.dumps({"error": code, "detail": mesg or reason}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


# gunicorn writes those answers through util.write_error and closes every connection through
# util.close_graceful; there is no other hook for either.
util.write_error = _write_json_error
_close_graceful = util.close_graceful
util.close_graceful = _close
