"""gunicorn settings of `mantle serve` (`-c python:mantle_site.gunicorn_conf`).

Bind and worker count come from the command line (server.bind, server.workers).
"""

from __future__ import annotations

import json
import os
from typing import Any

from gunicorn import util

wsgi_app = "mantle_site.wsgi"
# The app is imported once, in the master, and the workers fork from it: N workers importing
# Django at once on a loaded machine took 28-42 s to answer (13 workers, 2 cores), forks take
# none.
preload_app = True
accesslog = "-"
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


# gunicorn writes those answers through util.write_error; there is no other hook for them.
util.write_error = _write_json_error
