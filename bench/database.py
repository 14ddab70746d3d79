"""The benchmark's own database, `mantle_bench` (`$MANTLE_BENCH_DATABASE`: benchmarks that share
a server each need their own, since every round truncates the executions), on the machine's
PostgreSQL or the embedded one.

Django is configured for it through the environment (DATABASE_URL, MANTLE_DATABASE_URL), so the
subprocesses the benchmarks start (gunicorn, qcluster) use the same database.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import psycopg

NAME = os.environ.get("MANTLE_BENCH_DATABASE", "mantle_bench")
LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def with_database(url: str, name: str) -> str:
    return urlsplit(url)._replace(path=f"/{name}").geturl()


def _reachable(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


def server_url(*, embedded: bool) -> tuple[str, str]:
    """(URL of any database on the server to use, a label): $DATABASE_URL, else the machine's
    PostgreSQL on 127.0.0.1:5432, else (or with `embedded`) the embedded server."""
    if not embedded:
        if os.environ.get("DATABASE_URL"):
            return os.environ["DATABASE_URL"], "DATABASE_URL"
        if _reachable(LOCAL_SERVER):
            return LOCAL_SERVER, "machine (127.0.0.1:5432)"
    from mantle_site import embedded_db

    return embedded_db.ensure_running(), "embedded (.mantle/)"


def prepare(*, embedded: bool) -> tuple[str, str]:
    """Create `mantle_bench` if needed, point Django at it, set Django up and migrate."""
    server, label = server_url(embedded=embedded)
    with psycopg.connect(with_database(server, "postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [NAME]).fetchone():
            conn.execute(f'CREATE DATABASE "{NAME}"')
    url = with_database(server, NAME)
    os.environ["DATABASE_URL"] = url
    os.environ["MANTLE_DATABASE_URL"] = url
    # Teams created here all set their own limit; this keeps the default out of every figure.
    os.environ["MANTLE_ENGINE_MAX_CONCURRENT_EXECUTIONS_PER_TEAM"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mantle_site.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    return url, label


_ROUND_TABLES = (
    "executions_stepexecution",
    "executions_execution",
    "executions_rejection",
    "executions_keyturn",
    "django_q_ormq",
    "django_q_task",
)


def truncate_executions() -> None:
    """Empty every table an admission or a dispatch writes to, so rounds start equal: as in a
    fresh database, without the statistics of what they held. A truncated table keeps them, and
    plans made from them (a function's, once per connection) are wrong for the round: after
    figure 8's million rows, figure 10's claims read every running execution per waiting step,
    0.58 of its ideal against 0.83 on a fresh database (docs/performance.md, Step-scope
    hand-off). Deleting them takes a superuser, which the benchmark's connection is."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(_ROUND_TABLES)} CASCADE")
        cursor.execute(
            "DELETE FROM pg_statistic WHERE starelid = ANY(%s::regclass[])",
            [list(_ROUND_TABLES)],
        )
