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


def child_exit(server: Any, worker: Any) -> None:
    # prometheus_client's multiprocess bookkeeping for a worker that exited (its live gauges).
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
