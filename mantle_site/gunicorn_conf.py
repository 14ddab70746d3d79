"""gunicorn settings of `mantle serve` (`-c python:mantle_site.gunicorn_conf`).

Bind and worker count come from the command line (server.bind, server.workers).
"""

from __future__ import annotations

import os
from typing import Any

wsgi_app = "mantle_site.wsgi"
accesslog = "-"
timeout = 30
graceful_timeout = 10
# One default path per user (~/.gunicorn/gunicorn.ctl) would be fought over by every `mantle
# serve` on the machine (split roles, tests); Mantle does not use the control interface.
control_socket_disable = True


def child_exit(server: Any, worker: Any) -> None:
    # prometheus_client's multiprocess bookkeeping for a worker that exited (its live gauges).
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
