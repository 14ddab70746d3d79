"""The egress policy of `http/request`: real sockets and real local servers. The suite's config
allows 127.0.0.1 (the tests' own servers); 127.0.0.2 stands for an internal service that the
default policy must keep unreachable by every spelling and through redirects."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from http.server import ThreadingHTTPServer
from typing import cast

import httpx
import pytest

from engine.actions import ActionContext, ActionFailed
from engine.actions.http import run
from engine.egress import EgressRefused, HttpConfig, destination_resolve
from tests.servers import Handler, serving

LOCAL_ONLY = HttpConfig(allow=(ipaddress.ip_network("127.0.0.1/32"),))


class Internal(Handler):
    def do_GET(self) -> None:
        cast(Recorder, self.server).hits.append((self.path, self.headers["Host"]))
        if self.path.startswith("/redirect"):
            self.send(302, b"", location=self.path.split("?to=", 1)[1])
            return
        body = b"x" * 5000 if self.path == "/big" else b'{"secret": "internal"}'
        self.send(200, body, content_type="application/json")


class Recorder(ThreadingHTTPServer):
    def __init__(self, host: str) -> None:
        super().__init__((host, 0), Internal)
        self.hits: list[tuple[str, str]] = []


@pytest.fixture
def listen() -> Iterator[Callable[[str], tuple[int, list[tuple[str, str]]]]]:
    """listen(host) → (port, hits): a real HTTP server on that address recording each request."""
    with ExitStack() as servers:

        def start(host: str) -> tuple[int, list[tuple[str, str]]]:
            httpd = Recorder(host)
            servers.enter_context(serving(httpd))
            return httpd.server_address[1], httpd.hits

        yield start


@pytest.fixture
def policy(mantle_config: Callable[..., None]) -> Callable[[HttpConfig], None]:
    return lambda http: mantle_config("engine", http=http)


def fetch(url: str) -> dict:
    async def fetch_() -> dict:
        async with httpx.AsyncClient(trust_env=False) as client:
            return await run({"url": url, "timeout": "5s"}, ActionContext(http=client))

    # On a thread of its own: an event loop may already run in this one (the browser tests').
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, fetch_()).result()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost/",
        "http://[::1]/",
        "http://0.0.0.0/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://2130706433/",  # 127.0.0.1 as one decimal number
        "http://0x7f.1/",
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped IPv6
        "file:///etc/passwd",
    ],
)
def test_the_default_policy_refuses_internal_addresses(url: str) -> None:
    with pytest.raises(EgressRefused):
        destination_resolve(url, HttpConfig())


def test_the_default_policy_refuses_this_machines_own_addresses() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # UDP: no packet is sent, the route picks a source
        except OSError:
            pytest.skip("no route off this machine: it has no non-loopback address")
        own = probe.getsockname()[0]
    if ipaddress.ip_address(own).is_loopback:
        pytest.skip("no non-loopback address")
    with pytest.raises(EgressRefused, match="an address of this server"):
        destination_resolve(f"http://{own}:8000/metrics", HttpConfig())


def test_a_public_address_is_allowed_and_deny_adds_to_the_defaults() -> None:
    assert destination_resolve("https://93.184.215.14/x", HttpConfig()).url.host == "93.184.215.14"
    deny = HttpConfig(deny=(ipaddress.ip_network("93.184.0.0/16"),))
    with pytest.raises(EgressRefused, match=r"engine\.http\.deny"):
        destination_resolve("https://93.184.215.14/x", deny)


def test_it_connects_to_the_address_it_checked() -> None:
    # The name is resolved once: the request goes to the IP literal (no second lookup a
    # rebinding DNS server could answer differently); Host and SNI keep the name.
    destination = destination_resolve(
        "https://localhost:8443/a?b=1", HttpConfig(allow=("localhost",))
    )
    assert ipaddress.ip_address(destination.url.host).is_loopback
    assert (destination.url.port, destination.url.raw_path) == (8443, b"/a?b=1")
    assert destination.headers == {"Host": "localhost:8443"}
    assert destination.extensions == {"sni_hostname": "localhost"}


def test_allowed_servers_are_reached_with_their_host_name(policy, listen) -> None:
    policy(HttpConfig(allow=("localhost", ipaddress.ip_network("127.0.0.1/32"))))
    port, hits = listen("127.0.0.1")
    assert fetch(f"http://localhost:{port}/ok")["json"] == {"secret": "internal"}
    assert fetch(f"http://127.0.0.1:{port}/redirect?to=/ok")["status"] == 200
    assert hits == [
        ("/ok", f"localhost:{port}"),
        ("/redirect?to=/ok", f"127.0.0.1:{port}"),
        ("/ok", f"127.0.0.1:{port}"),
    ]


@pytest.mark.parametrize(
    "spelling",
    ["127.0.0.2", "2130706434", "[::ffff:127.0.0.2]", "0x7f000002"],
)
def test_an_internal_server_is_unreachable_directly_and_through_a_redirect(
    policy, listen, spelling: str
) -> None:
    policy(LOCAL_ONLY)
    internal_port, internal_hits = listen("127.0.0.2")
    port, hits = listen("127.0.0.1")
    internal = f"http://{spelling}:{internal_port}/"
    with pytest.raises(ActionFailed, match="refused"):
        fetch(internal)
    with pytest.raises(ActionFailed, match="refused"):
        fetch(f"http://127.0.0.1:{port}/redirect?to={internal}")
    assert [path for path, _host in hits] == [f"/redirect?to={internal}"]
    assert internal_hits == []


def test_a_response_body_over_the_cap_fails_the_step_naming_the_limit(policy, listen) -> None:
    policy(HttpConfig(allow=LOCAL_ONLY.allow, max_response_bytes=4096))
    port, _hits = listen("127.0.0.1")
    with pytest.raises(ActionFailed, match=r"engine\.http\.max_response_bytes \(4096 bytes\)"):
        fetch(f"http://127.0.0.1:{port}/big")
    assert fetch(f"http://127.0.0.1:{port}/ok")["status"] == 200


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",  # RFC 1918
        "10.255.255.254",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.1.1",
        "100.64.0.1",  # CGNAT (shared address space)
        "100.127.255.254",
        "192.0.0.1",  # IETF protocol assignments
        "192.0.2.1",  # documentation
        "198.18.0.1",  # benchmarking
        "240.0.0.1",  # reserved
        "[fd12:3456::1]",  # IPv6 unique-local
        "[2001:db8::1]",  # IPv6 documentation
        "[2002:a00:1::1]",  # 6to4 of 10.0.0.1
        "[64:ff9b::a00:1]",  # NAT64 of 10.0.0.1
        "[::ffff:10.0.0.1]",  # IPv4-mapped
        "[::ffff:100.64.0.1]",
        "167772161",  # 10.0.0.1 as one decimal number
        "0xa.1",
    ],
)
def test_the_default_policy_refuses_every_non_public_range(address: str) -> None:
    # An IP literal resolves without a query and the check runs before any socket connects.
    with pytest.raises(EgressRefused, match="private, loopback, link-local or reserved"):
        destination_resolve(f"http://{address}/", HttpConfig())


def test_allow_opens_an_internal_network_and_a_host_name() -> None:
    internal = HttpConfig(allow=(ipaddress.ip_network("10.1.0.0/16"),))
    assert destination_resolve("http://10.1.2.3:8080/x", internal).url.host == "10.1.2.3"
    with pytest.raises(EgressRefused):
        destination_resolve("http://10.2.0.1/", internal)


class Counting(httpx.AsyncBaseTransport):
    """A transport that counts what would have been sent: a refusal must leave it at zero."""

    def __init__(self) -> None:
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return httpx.Response(200, json={})


@pytest.mark.parametrize(
    "url", ["http://10.0.0.1/", "http://192.168.0.10:8080/", "http://100.64.1.1/"]
)
def test_the_action_refuses_before_connecting_and_says_it_is_final(url: str) -> None:
    transport = Counting()

    async def fetch_() -> dict:
        async with httpx.AsyncClient(transport=transport) as client:
            return await run({"url": url}, ActionContext(http=client))

    with ThreadPoolExecutor(1) as thread, pytest.raises(ActionFailed, match="refused") as raised:
        thread.submit(asyncio.run, fetch_()).result()
    assert raised.value.retryable is False
    assert transport.sent == 0
