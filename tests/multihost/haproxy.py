"""PgBouncer in the failover path, as Patroni's documentation deploys it: on an app host, an
HAProxy routes to the PostgreSQL whose Patroni answers `GET /primary` with 200 (checked every
second; a server marked down has its sessions cut), and a PgBouncer in transaction pooling mode
sits in front of that HAProxy. Mantle's pooled url goes through that PgBouncer; its direct url
(LISTEN, the clock's lock) is the cluster's multi-host url (docs/operations.md, Database
failover). PgBouncer picks no server itself: it has no `target_session_attrs`, and a
multi-host `host=` sends its connections round-robin, to the standby too."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tests.multihost.hosts import CLIENT_OPTIONS, DATABASE, POSTGRES_PORT, start, stop
from tests.multihost.network import Host
from tests.multihost.patroni import REST_PORT, PatroniCluster
from tests.multihost.pgbouncer import PgBouncer

BINARY = shutil.which("haproxy") or "/usr/sbin/haproxy"
HAPROXY_PORT, PGBOUNCER_PORT = 5000, 6432
# Patroni's REST API is asked every second; two failures mark a server down, one success up.
CONFIG = """\
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s
listen primary
    bind 127.0.0.1:{port}
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
{servers}
"""


def missing() -> str | None:
    if not Path(BINARY).exists():
        return "haproxy missing: `make test` installs it as root (apt-get install haproxy)"
    return None


class PooledPrimary:
    """HAProxy and PgBouncer on `host`, in front of `cluster`'s primary."""

    def __init__(self, host: Host, cluster: PatroniCluster) -> None:
        self.cluster = cluster
        self.directory = Path(tempfile.mkdtemp(prefix=f"mantle-haproxy-{host.name}-"))
        servers = "\n".join(
            f"    server {node.name} {node.host.back}:{POSTGRES_PORT} check port {REST_PORT}"
            for node in cluster.databases
        )
        config = self.directory / "haproxy.cfg"
        config.write_text(CONFIG.format(port=HAPROXY_PORT, servers=servers))
        self.haproxy = start(
            [*host.prefix, BINARY, "-db", "-f", str(config)], self.directory / "haproxy.log"
        )
        self.address = host.back
        try:
            self.pgbouncer = PgBouncer(
                server=f"host=127.0.0.1 port={HAPROXY_PORT}",
                listen=host.back,
                port=PGBOUNCER_PORT,
                pool_size=20,
                prefix=host.prefix,
            )
        except BaseException:
            stop(self.haproxy)
            raise

    def app_env(self) -> dict[str, str]:
        pooled = (
            f"postgresql://postgres@{self.address}:{PGBOUNCER_PORT}/{DATABASE}?{CLIENT_OPTIONS}"
        )
        return {"DATABASE_URL": pooled, "MANTLE_DATABASE_DIRECT_URL": self.cluster.client_url}

    def close(self) -> None:
        self.pgbouncer.stop()
        stop(self.haproxy)
        shutil.rmtree(self.directory, ignore_errors=True)
