"""Figure 7: admission through PgBouncer (transaction pooling, 8 server connections) against the
same admissions straight to PostgreSQL, in alternating rounds on emptied tables. Mantle's
`database.url` may point at PgBouncer (README: running on several machines); this is its cost."""

from __future__ import annotations

from django.conf import settings

from bench import database, fixtures, throughput
from bench.report import Report, ratio_row
from tests.multihost.pgbouncer import PgBouncer, missing

POOL_SIZE = 8


def run(
    report: Report,
    *,
    hot: list[fixtures.Target],
    clients: list[int],
    seconds: int,
    rounds: int,
) -> None:
    why = missing()
    if why:
        raise RuntimeError(why)
    db = settings.DATABASES["default"]
    bouncer = PgBouncer.in_front_of(
        db["HOST"] or "127.0.0.1", db["PORT"] or 5432, pool_size=POOL_SIZE
    )
    report.notes.append(
        f"figure 7: execution_admit() on one hot team's open workflow, each client a thread on its"
        f" own connection, through PgBouncer ({POOL_SIZE} server connections, transaction pooling)"
        " vs straight to PostgreSQL; rounds alternate on emptied tables"
    )
    try:
        for count in clients:
            pooled: list[float] = []
            direct: list[float] = []
            for round_ in range(rounds):
                for side in ("pooled", "direct") if round_ % 2 else ("direct", "pooled"):
                    database.truncate_executions()
                    if side == "direct":
                        direct.append(throughput.service(hot, clients=count, seconds=seconds))
                    else:
                        with bouncer.carrying_this_process():
                            pooled.append(throughput.service(hot, clients=count, seconds=seconds))
            report.add(
                ratio_row(
                    "7 pooled admission",
                    f"through PgBouncer, {count} clients (vs direct)",
                    pooled,
                    direct,
                    "/s",
                    0,
                )
            )
    finally:
        bouncer.stop()
        database.truncate_executions()
