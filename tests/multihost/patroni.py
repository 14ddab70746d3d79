"""A highly available PostgreSQL on the test hosts, as it is deployed: Patroni (its built-in Raft
DCS, no etcd) managing Debian's PostgreSQL on two database hosts, a primary and a synchronous
standby (`synchronous_mode`), and `patroni_raft_controller` on a third host as the Raft witness.
Clients reach the primary through a libpq multi-host URL with `target_session_attrs=read-write`
(docs/operations.md, Database failover)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import httpx
import psycopg
import yaml

from tests.multihost.hosts import (
    CLIENT_OPTIONS,
    DATABASE,
    POSTGRES_PORT,
    SERVER_KEEPALIVES,
    postgres_bin,
    start,
)
from tests.multihost.network import Host, Network
from tests.multihost.pgbouncer import SYSTEM_USER, as_unprivileged
from tests.processes import CONFIG, ROOT

BIN = Path(sys.executable).parent
PATRONICTL = BIN / "patronictl"
# Patroni runs as PostgreSQL's system user, who may not read this interpreter (e.g. one under
# /root): it runs on the system's Python of the same version, importing the test environment's
# packages (patroni[raft] from pyproject.toml's test extra).
SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
PACKAGES = sysconfig.get_paths()["purelib"]
REST_PORT, RAFT_PORT = 8008, 5010
SCOPE = "mantle"
# Patroni's smallest leader lease (it raises a smaller ttl to 20 s): a primary that stops
# renewing it is replaced ttl seconds later at most; loop_wait + 2 * retry_timeout <= ttl.
TTL, LOOP_WAIT, RETRY_TIMEOUT = 20, 1, 5


def missing() -> str | None:
    if postgres_bin() is None:
        return "Debian's PostgreSQL binaries missing (apt-get install postgresql)"
    if importlib.util.find_spec("patroni") is None or importlib.util.find_spec("pysyncobj") is None:
        return "patroni[raft] missing from the test environment (pip install -e '.[test]')"
    if not SYSTEM_PYTHON.exists():
        return f"{SYSTEM_PYTHON} missing: Patroni runs on it as the postgres user"
    return None


class Node:
    """One Patroni (and its PostgreSQL) on a host, or the Raft witness; restartable."""

    def __init__(self, name: str, host: Host, directory: Path, config: dict, command: str) -> None:
        self.name, self.host, self.directory, self.command = name, host, directory, command
        self.config_file = directory / "patroni.yml"
        self.config_file.write_text(yaml.safe_dump(config))
        self.log = directory / "patroni.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.directory),
            "LC_ALL": "C.UTF-8",
            "PYTHONPATH": PACKAGES,
        }
        python = str(SYSTEM_PYTHON) if as_unprivileged() else sys.executable
        main = f"from {self.command} import main; main()"
        self.process = start(
            [*self.host.prefix, *as_unprivileged(), python, "-c", main, str(self.config_file)],
            self.log,
            env=env,
        )

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class PatroniCluster:
    """pg1 and pg2 (Patroni + PostgreSQL) and a Raft witness, on hosts of `network`."""

    def __init__(self, network: Network, first: int = 2) -> None:
        bin_dir = postgres_bin()
        assert bin_dir is not None
        self.network = network
        self.directory = Path(tempfile.mkdtemp(prefix="mantle-patroni-"))
        os.chmod(self.directory, 0o755)
        names = ["pg1", "pg2", "raft"]
        hosts = [network.add_host(name, first + n, front=False) for n, name in enumerate(names)]
        raft_addrs = [f"{host.back}:{RAFT_PORT}" for host in hosts]
        self.nodes: dict[str, Node] = {}
        for host, name in zip(hosts, names, strict=True):
            directory = self.directory / name
            directory.mkdir(mode=0o700)
            (directory / "raft").mkdir(mode=0o700)
            own = f"{host.back}:{RAFT_PORT}"
            raft = {
                "data_dir": str(directory / "raft"),
                "self_addr": own,
                "partner_addrs": [addr for addr in raft_addrs if addr != own],
            }
            config: dict = {"scope": SCOPE, "name": name, "raft": raft}
            command = "patroni.raft_controller"
            if name != "raft":
                config.update(self._patroni_config(host, directory, bin_dir))
                command = "patroni.__main__"
            if as_unprivileged():
                for path in (directory, directory / "raft"):
                    shutil.chown(path, SYSTEM_USER)
            self.nodes[name] = Node(name, host, directory, config, command)
        try:
            self._bootstrap(bin_dir)
        except BaseException:
            self.close()
            raise

    def _bootstrap(self, bin_dir: Path) -> None:
        for node in self.nodes.values():
            node.start()
        self.wait_healthy(timeout=120)
        subprocess.run(
            [*self.leader_node().host.prefix, *as_unprivileged(), str(bin_dir / "createdb"),
             "-h", "127.0.0.1", "-U", "postgres", DATABASE],
            check=True,
            capture_output=True,
            timeout=60,
        )  # fmt: skip

    @staticmethod
    def _patroni_config(host: Host, directory: Path, bin_dir: Path) -> dict:
        address = f"{host.back}:{POSTGRES_PORT}"
        parameters = {
            "max_connections": 300,
            "fsync": "off",  # processes die in these tests, never the machine
            "wal_log_hints": "on",  # pg_rewind
            "unix_socket_directories": str(directory),
            **dict(setting.split("=") for setting in SERVER_KEEPALIVES),
        }
        return {
            "restapi": {
                "listen": f"{host.back}:{REST_PORT}",
                "connect_address": f"{host.back}:{REST_PORT}",
            },
            "bootstrap": {
                "dcs": {
                    "ttl": TTL,
                    "loop_wait": LOOP_WAIT,
                    "retry_timeout": RETRY_TIMEOUT,
                    "maximum_lag_on_failover": 1024 * 1024,
                    "synchronous_mode": True,
                    "postgresql": {"use_pg_rewind": True, "parameters": parameters},
                },
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}, "no-sync"],
                "pg_hba": [
                    "local all all trust",
                    "host all all 0.0.0.0/0 trust",
                    "host replication all 0.0.0.0/0 trust",
                ],
            },
            "postgresql": {
                "listen": f"{host.back},127.0.0.1:{POSTGRES_PORT}",
                "connect_address": address,
                "data_dir": str(directory / "pgdata"),
                "bin_dir": str(bin_dir),
                "pgpass": str(directory / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "postgres"},
                    "replication": {"username": "replicator", "password": "replicator"},
                    "rewind": {"username": "postgres", "password": "postgres"},
                },
                "parameters": {"unix_socket_directories": str(directory)},
            },
        }

    # -- what the tests read -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Mantle's DATABASE_URL: every database host, the writable one chosen by libpq."""
        hosts = ",".join(f"{n.host.back}:{POSTGRES_PORT}" for n in self.databases)
        return f"postgresql://postgres@{hosts}/{DATABASE}?target_session_attrs=read-write"

    @property
    def client_url(self) -> str:
        return f"{self.url}&{CLIENT_OPTIONS}"

    @property
    def databases(self) -> list[Node]:
        return [self.nodes["pg1"], self.nodes["pg2"]]

    def members(self) -> list[dict]:
        """Patroni's view of the cluster (GET /cluster on any Patroni that answers), or []."""
        for node in self.databases:
            with contextlib.suppress(httpx.HTTPError, json.JSONDecodeError):
                answer = httpx.get(f"http://{node.host.back}:{REST_PORT}/cluster", timeout=1)
                return answer.json().get("members", [])
        return []

    def leader(self) -> str | None:
        return next((m["name"] for m in self.members() if m["role"] == "leader"), None)

    def leader_node(self) -> Node:
        name = self.leader()
        assert name is not None, self.logs()
        return self.nodes[name]

    def wait_leader(self, other_than: str | None = None, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.leader()
            if leader and leader != other_than and self.writable(self.nodes[leader]):
                return leader
            time.sleep(0.2)
        raise AssertionError(f"no new leader (was {other_than}):\n{self.logs()}")

    def wait_healthy(self, timeout: float = 120) -> None:
        """A leader and a synchronous standby streaming from it, both Patroni running."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            members = self.members()
            roles = {m["role"]: m for m in members}
            if (
                "leader" in roles
                and roles.get("sync_standby", {}).get("state") == "streaming"
                and self.writable(self.nodes[roles["leader"]["name"]])
            ):
                return
            time.sleep(0.5)
        raise AssertionError(f"cluster not healthy: {self.members()}\n{self.logs()}")

    @staticmethod
    def writable(node: Node) -> bool:
        try:
            with psycopg.connect(
                f"postgresql://postgres@{node.host.back}:{POSTGRES_PORT}/postgres",
                connect_timeout=1,
                autocommit=True,
            ) as conn:
                return not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]  # type: ignore[index]
        except psycopg.Error:
            return False

    def query(self, sql: str, params: list[object] | None = None) -> list[tuple]:
        """On the primary, whichever it is (libpq's choice, as Mantle's)."""
        with psycopg.connect(self.client_url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def query_node(self, name: str, sql: str, params: list[object] | None = None) -> list[tuple]:
        """On that host's server, primary or standby."""
        url = f"postgresql://postgres@{self.nodes[name].host.back}:{POSTGRES_PORT}/{DATABASE}"
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            return conn.execute(sql, params).fetchall()

    def manage(self, script: str) -> str:
        env = {
            **os.environ,
            **CONFIG,
            "DATABASE_URL": self.client_url,
            "DJANGO_SETTINGS_MODULE": "mantle_site.settings",
        }
        done = subprocess.run(
            [sys.executable, "-c", "import django\ndjango.setup()\n" + script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def app_env(self) -> dict[str, str]:
        """Mantle straight to the primary: no pooler (docs/operations.md, Database failover)."""
        return {"DATABASE_URL": self.client_url}

    # -- what the tests do ---------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """SIGKILL Patroni and PostgreSQL on that host (every process of it)."""
        self.nodes[name].host.kill_all()
        process = self.nodes[name].process
        assert process is not None
        process.wait(timeout=10)

    def restart(self, name: str) -> None:
        """Patroni again on a host whose processes are gone: it rejoins (pg_rewind if needed)."""
        node = self.nodes[name]
        assert not node.running()
        node.start()

    def heal(self) -> None:
        """Patroni again on every database host that lost it; a leader and a sync standby."""
        for node in self.databases:
            if not node.running():
                node.start()
        self.wait_healthy()

    def writable_inside(self, name: str) -> bool:
        """Whether that host's PostgreSQL accepts writes, asked from the host itself (it may be
        cut off from every other)."""
        bin_dir = postgres_bin()
        assert bin_dir is not None
        asked = subprocess.run(
            [*self.nodes[name].host.prefix, str(bin_dir / "psql"), "-h", "127.0.0.1",
             "-U", "postgres", "-tAc", "SELECT pg_is_in_recovery()", "postgres"],
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "PGCONNECT_TIMEOUT": "2"},
        )  # fmt: skip
        return asked.returncode == 0 and asked.stdout.strip() == "f"

    def switchover(self, leader: str, candidate: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PATRONICTL), "-c", str(self.nodes[leader].config_file), "switchover",
             "--leader", leader, "--candidate", candidate, "--force"],
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip

    def logs(self) -> str:
        return "\n".join(
            f"== {name}\n{node.log.read_text()[-2500:] if node.log.exists() else ''}"
            for name, node in self.nodes.items()
        )

    def close(self) -> None:
        for node in self.nodes.values():
            node.host.kill_all()
            if node.process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)
