"""Test hosts in Linux network namespaces (iproute2), each with its own addresses.

Two bridges in the root namespace: the back network (the database host and every app host's
`eth0`) and the front network (every app host's `eth1`, where clients reach the web servers).
The test process sits on both (x.x.x.1), so it is a client of the web hosts and can look at the
database host, and nothing else is ever contacted. A partition takes an app host's back link
out of its bridge: its clients still reach it, it no longer reaches the database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def missing() -> str | None:
    """Why this machine cannot create the test hosts, or None."""
    if os.getuid() != 0:
        return "the multi-host tests need root (network namespaces); CI runs them as root"
    if shutil.which("ip") is None:
        return "iproute2 missing: `make test` installs it as root (apt-get install iproute2)"
    probe = f"mantle-probe-{os.getpid()}"
    try:
        ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"cannot create a network namespace here ({exc}): the multi-host tests are skipped"
    ip("netns", "del", probe)
    return None


@dataclass
class Host:
    name: str  # the namespace
    back: str  # address on the back network
    front: str | None  # address on the front network (app hosts)
    links: list[str] = field(default_factory=list)  # root-side ends of its veth pairs

    @property
    def prefix(self) -> tuple[str, ...]:
        """Runs a command in this host: `[*host.prefix, "redis-server", …]`."""
        return ("ip", "netns", "exec", self.name)

    def pids(self) -> list[int]:
        found = subprocess.run(
            ["ip", "netns", "pids", self.name], capture_output=True, text=True, timeout=10
        )
        return [int(pid) for pid in found.stdout.split()]

    def kill_all(self) -> int:
        """SIGKILL every process of this host (what losing the machine does); how many."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def cut_back_link(self, bridge: str) -> None:
        """Packets to and from the back network vanish (the link is out of the bridge), as
        on a broken switch: no error reaches the host. (Taking the link down instead would
        stall its packets in the host's own queue, which TCP does not see as a loss.)"""
        ip("link", "set", self.links[0], "nomaster")

    def restore_back_link(self, bridge: str) -> None:
        ip("link", "set", self.links[0], "master", bridge)


class Network:
    """The bridges and hosts of one test run, named after this process so runs never collide;
    `close()` removes every process, namespace and link it made, whatever state they are in."""

    def __init__(self) -> None:
        self.tag = f"mh{os.getpid() % 100000}"
        subnet = 100 + os.getpid() % 100
        self.back_net = f"10.{subnet}.1"
        self.front_net = f"10.{subnet}.2"
        self.hosts: list[Host] = []
        self.bridges = [f"{self.tag}b", f"{self.tag}f"]
        for bridge, net in zip(self.bridges, (self.back_net, self.front_net), strict=True):
            ip("link", "add", bridge, "type", "bridge")
            ip("addr", "add", f"{net}.1/24", "dev", bridge)
            ip("link", "set", bridge, "up")

    def add_host(self, role: str, number: int, *, front: bool) -> Host:
        host = Host(
            name=f"{self.tag}-{role}",
            back=f"{self.back_net}.{number}",
            front=f"{self.front_net}.{number}" if front else None,
        )
        self.hosts.append(host)
        ip("netns", "add", host.name)
        ip("-n", host.name, "link", "set", "lo", "up")
        networks = [(self.bridges[0], host.back)]
        if host.front:
            networks.append((self.bridges[1], host.front))
        for index, (bridge, address) in enumerate(networks):
            outside = f"{self.tag}{role[:4]}{index}"
            inside = f"eth{index}"
            ip("link", "add", outside, "type", "veth", "peer", "name", f"{outside}p")
            ip("link", "set", f"{outside}p", "netns", host.name)
            ip("-n", host.name, "link", "set", f"{outside}p", "name", inside)
            ip("link", "set", outside, "master", bridge, "up")
            ip("-n", host.name, "addr", "add", f"{address}/24", "dev", inside)
            ip("-n", host.name, "link", "set", inside, "up")
            host.links.append(outside)
        return host

    def close(self) -> None:
        for host in self.hosts:
            host.kill_all()
        deadline = time.monotonic() + 5
        while any(host.pids() for host in self.hosts) and time.monotonic() < deadline:
            time.sleep(0.05)
        for host in self.hosts:
            for link in host.links:
                with contextlib.suppress(subprocess.CalledProcessError):
                    ip("link", "del", link)
            with contextlib.suppress(subprocess.CalledProcessError):
                ip("netns", "del", host.name)
        for bridge in self.bridges:
            with contextlib.suppress(subprocess.CalledProcessError):
                ip("link", "del", bridge)
