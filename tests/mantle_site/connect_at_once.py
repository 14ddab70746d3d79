"""One process of the embedded start-up race (test_embedded_db): `python -m
tests.mantle_site.connect_at_once THREADS DIRECTORY N`. Once set up it creates DIRECTORY/ready-N
and waits for DIRECTORY/go; then THREADS threads, each on a connection of its own, connect at
once. It creates DIRECTORY/connected-N and stays (a user of the server) until DIRECTORY/done;
prints `connected THREADS`, or the threads' tracebacks and exits 1."""

from __future__ import annotations

import sys
import threading
import time
import traceback
from pathlib import Path

import django


def wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.005)


def main() -> None:
    threads, directory, n = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    django.setup()
    from django.db import connection

    barrier = threading.Barrier(threads)
    errors: list[str] = []

    def connect() -> None:
        barrier.wait()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except BaseException:
            errors.append(traceback.format_exc())
        finally:
            connection.close()

    (directory / f"ready-{n}").touch()
    wait_for(directory / "go")
    workers = [threading.Thread(target=connect) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    (directory / f"connected-{n}").touch()
    wait_for(directory / "done")
    print("".join(errors) or f"connected {threads}")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
