"""What runs on the test hosts: the database host (PostgreSQL from Debian's binaries, initdb
into a temporary directory; Redis; PgBouncer in transaction pooling mode) and app hosts
(`mantle serve`, `--web-only` or `--workers-only`, against the database host's address).
Every process is started in a process group of its own and stopped by pid."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Protocol

import httpx
import psycopg

from tests.multihost.network import Host
from tests.multihost.pgbouncer import SYSTEM_USER, PgBouncer, as_unprivileged
from tests.processes import CONFIG, ENGINE, ROOT

POSTGRES_PORT, PGBOUNCER_PORT, REDIS_PORT, WEB_PORT = 5432, 6432, 6379, 8000
DATABASE = "mantle"
# Every client of the database host gives up on a dead link within seconds (libpq options):
# a request answers 503 database_unavailable instead of waiting on TCP's minutes of retries.
CLIENT_OPTIONS = (
    "connect_timeout=2&keepalives_idle=1&keepalives_interval=1&keepalives_count=2"
    "&tcp_user_timeout=3000"
)
# ... and so does the server, which ends the sessions (and session locks) of a host it lost.
SERVER_KEEPALIVES = (
    "tcp_keepalives_idle=1",
    "tcp_keepalives_interval=1",
    "tcp_keepalives_count=2",
    "tcp_user_timeout=3000",
)
LISTENERS_SQL = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'"
INITDB = ("-U", "postgres", "--auth=trust", "--no-sync")
CREATEDB = ("-h", "127.0.0.1", "-U", "postgres", DATABASE)
REDIS = ("--port", str(REDIS_PORT), "--save", "", "--appendonly", "no", "--protected-mode", "no")


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def missing() -> str | None:
    if postgres_bin() is None:
        return "Debian's PostgreSQL binaries missing (apt-get install postgresql)"
    if shutil.which("redis-server") is None:
        return "redis-server missing (apt-get install redis-server)"
    return None


def wait_for_port(address: tuple[str, int], process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{process.args} exited:\n{log.read_text()[-3000:]}")
        try:
            socket.create_connection(address, timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{process.args} not listening on {address}:\n{log.read_text()[-3000:]}")


def start(command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with log.open("wb") as output:
        return subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM to the process, then SIGKILL to its whole group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


class DatabaseHost:
    def __init__(self, host: Host, *, pool_size: int) -> None:
        self.host = host
        self.directory = Path(tempfile.mkdtemp(prefix="mantle-dbhost-"))
        os.chmod(self.directory, 0o755)
        pgdata = self.directory / "pgdata"
        bin_dir = postgres_bin()
        assert bin_dir is not None
        unprivileged = as_unprivileged()
        if unprivileged:
            shutil.chown(self.directory, SYSTEM_USER)
        subprocess.run(
            [*unprivileged, str(bin_dir / "initdb"), "-D", str(pgdata), *INITDB],
            check=True,
            capture_output=True,
            timeout=120,
        )
        with (pgdata / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 0.0.0.0/0 trust\n")
        settings = [
            f"listen_addresses=127.0.0.1,{host.back}",
            f"unix_socket_directories={self.directory}",
            "max_connections=300",
            "fsync=off",
            "synchronous_commit=off",
            *SERVER_KEEPALIVES,
        ]
        options = [arg for setting in settings for arg in ("-c", setting)]
        self.postgres = start(
            [*host.prefix, *unprivileged, str(bin_dir / "postgres"), "-D", str(pgdata), *options],
            self.directory / "postgres.log",
        )
        wait_for_port((host.back, POSTGRES_PORT), self.postgres, self.directory / "postgres.log")
        subprocess.run(
            [*host.prefix, *unprivileged, str(bin_dir / "createdb"), *CREATEDB],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.redis = start(
            [*host.prefix, "redis-server", "--bind", host.back, *REDIS],
            self.directory / "redis.log",
        )
        wait_for_port((host.back, REDIS_PORT), self.redis, self.directory / "redis.log")
        self.pgbouncer = PgBouncer(
            server=f"host=127.0.0.1 port={POSTGRES_PORT}",
            listen=host.back,
            port=PGBOUNCER_PORT,
            pool_size=pool_size,
            prefix=host.prefix,
        )

    @property
    def direct_url(self) -> str:
        return f"postgresql://postgres@{self.host.back}:{POSTGRES_PORT}/{DATABASE}"

    @property
    def pooled_url(self) -> str:
        return f"postgresql://postgres@{self.host.back}:{PGBOUNCER_PORT}/{DATABASE}"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.host.back}:{REDIS_PORT}/0"

    def app_env(self) -> dict[str, str]:
        return {
            "DATABASE_URL": f"{self.pooled_url}?{CLIENT_OPTIONS}",
            "MANTLE_DATABASE_DIRECT_URL": f"{self.direct_url}?{CLIENT_OPTIONS}",
            "MANTLE_ENGINE_BROKER": self.redis_url,
        }

    def manage(self, script: str) -> str:
        """Run Python with Django set up against this database (from the test process, over
        the back network); its stdout."""
        env = {
            **os.environ,
            **CONFIG,
            "DATABASE_URL": self.direct_url,
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

    def team(self, slug: str, *, limit: int | None, workflows: list[str]) -> str:
        """A team with those workflow documents applied; its API key."""
        return self.manage(
            "from teams.services import api_key_create, team_create\n"
            "from workflows.services import workflow_apply\n"
            f"team = team_create(slug={slug!r}, max_concurrent_executions={limit!r})\n"
            f"for content in {workflows!r}:\n"
            "    workflow_apply(team=team, content=content)\n"
            "print(api_key_create(team=team)[1])\n"
        ).split()[-1]

    def admit(self, team: str, workflow: str, count: int) -> None:
        """`count` executions admitted the way the API does (for tests without a web host)."""
        self.manage(
            "from executions.services.admission import execution_admit\n"
            "from workflows.models import WorkflowDefinition\n"
            "workflow = WorkflowDefinition.objects.select_related('team')"
            f".get(team__slug={team!r}, name={workflow!r})\n"
            f"for _ in range({count}):\n"
            "    execution_admit(team=workflow.team, workflow=workflow)\n"
        )

    def query(self, sql: str, params: list[object] | None = None) -> list[tuple]:
        with psycopg.connect(self.direct_url, autocommit=True, connect_timeout=2) as conn:
            return conn.execute(sql, params).fetchall()

    def listeners(self) -> int:
        """Step workers listening for work (their LISTEN sessions)."""
        return self.query(LISTENERS_SQL)[0][0]

    def close(self) -> None:
        try:
            self.pgbouncer.stop()
            stop(self.redis)
            stop(self.postgres)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


class Database(Protocol):
    def app_env(self) -> dict[str, str]:
        """How `mantle serve` reaches it: DATABASE_URL and the like."""
        ...


class AppHost:
    """`mantle serve` (or one of its roles) on an app host, against the database: for a
    DatabaseHost the pooled url through PgBouncer, the direct url for LISTEN and the clock, Redis
    as broker."""

    def __init__(
        self,
        host: Host,
        database: Database,
        *,
        role: str | None,
        workers: int = 1,
        web_workers: int = 2,
        engine: dict[str, float | str] | None = None,
    ) -> None:
        self.host = host
        self.url = f"http://{host.front}:{WEB_PORT}"
        self.directory = Path(tempfile.mkdtemp(prefix=f"mantle-{host.name}-"))
        self.log = self.directory / "serve.log"
        env = {
            **os.environ,
            **CONFIG,
            **database.app_env(),
            "MANTLE_ENGINE_WORKERS": str(workers),
            "MANTLE_SERVER_WORKERS": str(web_workers),
            "MANTLE_HOME": str(self.directory / "home"),
            "TMPDIR": str(self.directory),  # the claimer's lock file, gone with a killed host
            "PROMETHEUS_MULTIPROC_DIR": str(self.directory / "metrics"),
            "DJANGO_SECRET_KEY": "multihost-shared-secret",
            **{
                f"MANTLE_ENGINE_{key.upper()}": str(value)
                for key, value in {**ENGINE, **(engine or {})}.items()
            },
        }
        command = [sys.executable, "manage.py", "mantle_serve", "--bind", f"0.0.0.0:{WEB_PORT}"]
        if role:
            command.append(f"--{role}")
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                [*host.prefix, *command],
                cwd=ROOT,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.web = role != "workers-only"

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            if not self.web:
                return
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            time.sleep(0.2)
        raise AssertionError(f"{self.host.name} not ready:\n{self.log.read_text()[-3000:]}")

    def close(self) -> None:
        """Every process of the host SIGKILLed (its state is thrown away with it)."""
        self.host.kill_all()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)
