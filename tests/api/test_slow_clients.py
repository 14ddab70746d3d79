"""Slow clients against a real `mantle serve` (docs/hostile-input.md, Slow clients): fifty
connections sending their headers one line at a time hold no web worker, so `/healthz` and an
authenticated run are answered while they are open; one that never finishes is answered 408."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from teams.models import Team
from tests.factories import ApiKeyFactory, workflow_yaml
from tests.processes import Server
from workflows.services import workflow_apply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SLOW_CLIENTS = 50
LINE_EVERY = 0.5  # seconds between two header lines of a slow client


@contextlib.contextmanager
def slow_clients(server: Server, count: int = SLOW_CLIENTS) -> Iterator[list[socket.socket]]:
    """`count` connections that send a request head one line every LINE_EVERY seconds and
    never end it, for as long as the block runs."""
    address = urlsplit(server.url)
    clients = [
        socket.create_connection((address.hostname, address.port), timeout=10) for _ in range(count)
    ]
    stop = threading.Event()

    def dribble() -> None:
        for client in clients:
            client.sendall(b"POST /hooks/slow HTTP/1.1\r\nHost: mantle\r\n")
        line = 0
        while not stop.wait(LINE_EVERY):
            line += 1
            for client in clients:
                with contextlib.suppress(OSError):
                    client.sendall(b"X-Slow-%d: 1\r\n" % line)

    sender = threading.Thread(target=dribble, daemon=True)
    sender.start()
    try:
        time.sleep(2 * LINE_EVERY)  # every slow client has been accepted and is being read
        yield clients
    finally:
        stop.set()
        sender.join(timeout=10)
        for client in clients:
            client.close()


def unanswered(client: socket.socket) -> bool:
    """Nothing came back on `client` yet, and it is still open."""
    client.setblocking(False)
    try:
        client.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    finally:
        client.settimeout(10)
    return False


def answers_while_slow_clients_are_open(server: Server, key: str) -> list[int]:
    """The status of `/healthz` and of a run, three times each, while the slow clients send;
    a client timeout far above the 1 s goal (httpx raises when it passes)."""
    statuses = []
    with slow_clients(server) as clients, httpx.Client(base_url=server.url, timeout=5) as client:
        for _ in range(3):
            statuses.append(client.get("/healthz").status_code)
            run = client.post(
                "/api/v1/run/run", json={}, headers={"Authorization": f"Bearer {key}"}
            )
            statuses.append(run.status_code)
        assert all(unanswered(slow) for slow in clients), "the slow clients must still be open"
    return statuses


def test_fifty_slow_clients_leave_healthz_and_a_run_answering(team: Team, serve) -> None:
    workflow_apply(team=team, content=workflow_yaml("run"))
    _, key = ApiKeyFactory(team=team)
    server = serve(workers=1)  # one process: nothing else could answer for it
    assert answers_while_slow_clients_are_open(server, key) == [200, 202] * 3


def test_in_a_worker_that_reads_in_its_threads_slow_clients_hold_every_worker(
    team: Team, serve
) -> None:
    """The mutant the test above must catch: gunicorn's gthread worker (`server.threads` above
    1) gives a thread to each connection it reads; fifty slow clients hold all of them. One
    process, as above: with two, the kernel may hand one of them so few slow clients that it
    still answers (CI saw it)."""
    workflow_apply(team=team, content=workflow_yaml("run"))
    _, key = ApiKeyFactory(team=team)
    server = serve(workers=1, env={"MANTLE_SERVER_THREADS": "4"})
    with pytest.raises(httpx.TimeoutException):
        answers_while_slow_clients_are_open(server, key)


def test_a_request_not_sent_whole_in_time_is_answered_408(team: Team, serve) -> None:
    server = serve(workers=1, env={"MANTLE_SERVER_READ_TIMEOUT": "1s"})
    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as slow:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: mantle\r\n")
        answer = b""
        while chunk := slow.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b'"error": "request_timeout"' in answer
