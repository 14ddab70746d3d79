"""The claimer role: of the step workers of one `mantle serve`, one at a time listens for work
and claims it as it is announced; the others claim only on a slow backstop.

Every notification woke every worker, and all but one found nothing: with the 10 workers of a
default serve, those empty claims were two thirds of the CPU of a no-op execution (one worker
alone ran 3x the no-ops per second). The role is an exclusive flock(2) on a file `mantle serve`
creates: the kernel hands it to one waiting worker when its holder lets go or dies. The holder
lets go when its slots are full, so the next worker with room takes over the claims; a worker
waits for the role again once it has a free slot. A worker started on its own (no file) always
holds the role.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import threading
from collections.abc import Callable


class ClaimerRole:
    def __init__(self, path: str | None, on_acquired: Callable[[], None]) -> None:
        self.held = path is None
        self.waiting = False
        self.on_acquired = on_acquired
        self.fd = -1 if path is None else os.open(path, os.O_RDWR)

    def request(self) -> None:
        """Wait for the role (in a thread: flock blocks) unless held or already waited for;
        `on_acquired` runs on the event loop once it is ours."""
        if self.held or self.waiting:
            return
        self.waiting = True
        loop = asyncio.get_running_loop()

        def wait() -> None:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            with contextlib.suppress(RuntimeError):  # the loop closed: the process is stopping
                loop.call_soon_threadsafe(self._acquired)

        # A daemon thread: a process that stops while waiting does not wait for it.
        threading.Thread(target=wait, name="claimer-role", daemon=True).start()

    def release(self) -> None:
        if self.fd >= 0 and self.held:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self.held = False

    def _acquired(self) -> None:
        self.waiting = False
        self.held = True
        self.on_acquired()
