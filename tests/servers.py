"""Real local HTTP servers for the tests of http/request: a handler base that answers JSON, and
`serving`, which runs a server on a thread for the length of a `with`."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    """Subclasses route in do_GET / do_POST and answer with `reply` or `send`."""

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers["Content-Length"] or 0))

    def reply(self, status: int, payload: object) -> None:
        self.send(status, json.dumps(payload).encode(), content_type="application/json")

    def send(self, status: int, body: bytes, *, content_type: str = "", location: str = "") -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(httpd: ThreadingHTTPServer) -> Iterator[str]:
    """Serve `httpd` on a thread; yields its URL (`http://host:port`); closed on exit."""
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    host, port = httpd.server_address[:2]
    try:
        yield f"http://{host!s}:{port}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def local(handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server of `handler` on a free port of `host`."""
    return ThreadingHTTPServer((host, 0), handler)
