"""The local HTTP server of figure 5: it answers every request after holding it HOLD seconds,
any number at once (asyncio in a thread of the bench process)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HOLD = 5.0
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nheld"


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:  # keep-alive: one answer per request head
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                return
            await asyncio.sleep(HOLD)
            writer.write(RESPONSE)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@contextmanager
def server() -> Iterator[str]:
    """The URL of a running holding server; stopped on exit."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    address: list[str] = []
    stop = asyncio.Event()

    async def serve() -> None:
        server = await asyncio.start_server(_answer, "127.0.0.1", 0, backlog=4096)
        host, port = server.sockets[0].getsockname()[:2]
        address.append(f"http://{host}:{port}/hold")
        started.set()
        async with server:
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    if not started.wait(timeout=10):
        raise RuntimeError("the holding server did not start")
    try:
        yield address[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
