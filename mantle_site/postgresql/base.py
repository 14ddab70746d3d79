"""Django's PostgreSQL backend with a health check that costs no round trip.

Django's own check (CONN_HEALTH_CHECKS) sends `SELECT 1` before the first query of every
request: on a webhook, one round trip in three. A connection the server has closed (a restart,
a terminated backend) has its socket readable while idle, with the server's goodbye or EOF; an
idle connection nobody closed has nothing to read. So only a readable socket pays for Django's
`SELECT 1` (which also tells a pending notification from a closed connection).
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None or connection.closed or connection.broken:
            return False
        try:
            readable, _, _ = select.select([connection.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable or super().is_usable()
