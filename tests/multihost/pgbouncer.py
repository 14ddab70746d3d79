"""PgBouncer from Debian's package, in transaction pooling mode, in front of a PostgreSQL server:
started with a config of its own in a temporary directory, stopped by pid."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# PgBouncer refuses to run as root; Debian's package (and PostgreSQL's) bring this user.
SYSTEM_USER = "postgres"


def missing() -> str | None:
    """Why PgBouncer cannot run here, or None."""
    if not os.path.exists(BINARY):
        return "pgbouncer missing: `make test` installs it as root (apt-get install pgbouncer)"
    return None


def as_unprivileged(user: str = SYSTEM_USER) -> tuple[str, ...]:
    """A command prefix for a server that must not run as root (PostgreSQL, PgBouncer)."""
    return ("runuser", "-u", user, "--") if os.getuid() == 0 else ()


class PgBouncer:
    """`pool_size` server connections to `server` ("host=… port=…") shared by every client in
    transaction pooling mode, listening on `listen`:`port`, running as `user` (one that may
    open the server's socket). `prefix` runs it elsewhere (e.g. `ip netns exec <host>`)."""

    def __init__(
        self,
        *,
        server: str,
        port: int,
        listen: str = "127.0.0.1",
        pool_size: int = 4,
        prefix: tuple[str, ...] = (),
        user: str = SYSTEM_USER,
    ) -> None:
        self.address = (listen, port)
        self.directory = Path(tempfile.mkdtemp(prefix="mantle-pgbouncer-"))
        self.log = self.directory / "pgbouncer.log"
        config = self.directory / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = {server} user=postgres\n"
            "[pgbouncer]\n"
            f"listen_addr = {listen}\n"
            f"listen_port = {port}\n"
            "unix_socket_dir =\n"
            "auth_type = any\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {pool_size}\n"
            "min_pool_size = 0\n"
            "reserve_pool_size = 0\n"
            "max_client_conn = 1000\n"
            # A server it cannot reach fails the client's query in seconds, not minutes.
            "server_connect_timeout = 3\n"
            # ... and one that refused a login (no primary yet, in a failover) is tried again
            # a second later, not 15.
            "server_login_retry = 1\n"
            "query_wait_timeout = 10\n"
            # A client host lost mid-transaction must not keep its server connection (and the
            # row locks of its transaction) for TCP's hours: keepalives and a bound on idle
            # transactions hand them back within seconds.
            "tcp_keepalive = 1\n"
            "tcp_keepidle = 1\n"
            "tcp_keepintvl = 1\n"
            "tcp_keepcnt = 2\n"
            "tcp_user_timeout = 3000\n"
            "idle_transaction_timeout = 5\n"
            "server_reset_query =\n"
            "admin_users = postgres\n"
            # Django sends these start-up parameters; PgBouncer must pass them on, not refuse.
            "ignore_startup_parameters = extra_float_digits,options\n"
        )
        os.chmod(self.directory, 0o755)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*prefix, *as_unprivileged(user), BINARY, str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_listening()

    @contextmanager
    def carrying_this_process(self) -> Iterator[None]:
        """Every new connection of the default database in this process (every thread's) goes
        through this PgBouncer for the block, set up as a pooled `database.url` is
        (mantle_site.settings.pooled). In place: this thread's connection reads the same dict."""
        from django.conf import settings
        from django.db import connections

        from mantle_site.settings import pooled

        default = settings.DATABASES["default"]
        direct = dict(default)
        connections.close_all()
        host, port = self.address
        default.update(pooled(direct), HOST=host, PORT=str(port))
        try:
            yield
        finally:
            connections.close_all()
            default.clear()
            default.update(direct)

    @classmethod
    def in_front_of(cls, host: str, port: str | int, *, pool_size: int = 4) -> PgBouncer:
        """On a free local port, in front of a server at host (an address or, for the embedded
        server, a socket directory open to its own system user only) and port."""
        user = Path(host).owner() if host.startswith("/") else SYSTEM_USER
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        return cls(server=f"host={host} port={port}", port=free, pool_size=pool_size, user=user)

    def url(self, database: str) -> str:
        host, port = self.address
        return f"postgresql://postgres@{host}:{port}/{database}"

    def transactions(self) -> int:
        """Transactions PgBouncer has passed on so far, over every database (SHOW STATS)."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True) as admin:
            cursor = psycopg.ClientCursor(admin)
            rows = cursor.execute("SHOW STATS").fetchall()
            column = [c.name for c in cursor.description or ()].index("total_xact_count")
        return sum(int(row[column]) for row in rows)

    def _wait_listening(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"pgbouncer exited:\n{self.log.read_text()}")
            try:
                socket.create_connection(self.address, timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"pgbouncer not listening:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        shutil.rmtree(self.directory, ignore_errors=True)
