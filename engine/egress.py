"""Where `http/request` may connect (`engine.http` in mantle.yaml).

A URL's host is resolved once and every address it resolves to is checked; the request then
connects to the checked address itself (the URL's host becomes that IP literal, while the Host
header and TLS SNI keep the name), so a DNS answer that changes between the check and the
connection (rebinding) reaches nothing unchecked. A caller follows redirects itself and checks
every hop (`redirect_next` says where the next hop goes). Sync and async callers share this
module; resolution blocks, so an async caller runs `destination_resolve` in a thread.

Refused by default: every address that is not globally routable — loopback, unspecified,
link-local, private (RFC 1918, IPv6 unique-local), shared (CGNAT 100.64/10), reserved,
documentation and benchmarking ranges, multicast — and any address of this machine; `deny` adds
networks or hosts, `allow` exempts them (it wins over every deny). docs/hostile-input.md, Egress.

A refusal is final: it is judged before any connection is attempted, and the step fails without
a retry, since the same target would be refused again."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from typing import Any

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

HostOrNetwork = str | ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class HttpConfig:
    """`engine.http`: the egress policy of `http/request`, read by mantle_site.config. An entry is a
    network (CIDR or address) or a host name (`*.example.com` matches its subdomains)."""

    allow: tuple[HostOrNetwork, ...] = ()
    deny: tuple[HostOrNetwork, ...] = ()
    max_response_bytes: int = 1024 * 1024


MAX_REDIRECTS = 5


class EgressRefused(Exception):
    """The policy refuses the target: final, the step fails without a retry."""


class Unresolvable(Exception):
    """The host name did not resolve: may change, the step's retry applies."""


@dataclass(frozen=True)
class Destination:
    """A checked request target: send to `url` with `headers` and `extensions` added."""

    url: httpx.URL
    headers: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, Any] = field(default_factory=dict)


def destination_resolve(url: httpx.URL | str, policy: HttpConfig) -> Destination:
    url = httpx.URL(url)
    if url.scheme not in {"http", "https"}:
        raise EgressRefused(f"{url}: only http and https URLs are allowed")
    host = url.host.rstrip(".").lower()
    if not host:
        raise EgressRefused(f"{url}: no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = _resolve(host, port)
    if not _host_matches(host, policy.allow):
        if _host_matches(host, policy.deny):
            raise EgressRefused(f"{host} is denied by engine.http.deny")
        for address in addresses:
            reason = _denied(address, policy)
            if reason:
                raise EgressRefused(f"{host} resolves to {address}, {reason}")
    pinned = addresses[0]
    authority = host if url.port is None else f"{host}:{url.port}"
    extensions = {"sni_hostname": host} if url.scheme == "https" else {}
    return Destination(
        url=url.copy_with(host=str(pinned)), headers={"Host": authority}, extensions=extensions
    )


def redirect_next(
    response: httpx.Response, url: httpx.URL, method: str
) -> tuple[httpx.URL, str] | None:
    """The next hop's URL (relative to `url`, the URL as written, not the pinned one) and
    method, or None when `response` is not a redirect. 307/308 keep the method and body;
    the others turn into a GET without one, as browsers and httpx do."""
    if not response.is_redirect:
        return None
    location = url.join(response.headers["location"])
    if response.status_code in {307, 308}:
        return location, method
    return location, "HEAD" if method == "HEAD" else "GET"


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Unresolvable(f"{host}: cannot resolve: {exc}") from None
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        # ::ffff:127.0.0.1 reaches 127.0.0.1: judge an IPv4-mapped address as the IPv4 one.
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if address not in addresses:
            addresses.append(address)
    return addresses


def _denied(address: IPAddress, policy: HttpConfig) -> str | None:
    if _address_matches(address, policy.allow):
        return None
    if _address_matches(address, policy.deny):
        return "which engine.http.deny refuses"
    if _is_own(address):
        return "an address of this server (engine.http.allow to permit it)"
    if not _is_public(address):
        return (
            "a private, loopback, link-local or reserved address (engine.http.allow to permit it)"
        )
    return None


def _is_public(address: IPAddress) -> bool:
    """Globally routable (ipaddress's IANA special-purpose registries; NAT64's 64:ff9b::/96 is
    reserved), and for a 6to4 address the IPv4 address it leads to as well."""
    if not address.is_global or address.is_multicast or address.is_reserved:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.sixtofour is not None:
        return _is_public(address.sixtofour)
    return True


def _is_own(address: IPAddress) -> bool:
    """Whether `address` belongs to this machine: only a local address can be bound."""
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((str(address), 0))
        except OSError:
            return False
    return True


def _address_matches(address: IPAddress, entries: tuple[HostOrNetwork, ...]) -> bool:
    return any(
        not isinstance(entry, str) and entry.version == address.version and address in entry
        for entry in entries
    )


def _host_matches(host: str, entries: tuple[HostOrNetwork, ...]) -> bool:
    return any(
        isinstance(entry, str)
        and (host == entry or (entry.startswith("*.") and host.endswith(entry[1:])))
        for entry in entries
    )
