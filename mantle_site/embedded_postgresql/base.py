"""Django's PostgreSQL backend on the embedded server (mantle_site.embedded_db), which this
process starts or adopts at its first connection rather than when the settings load: a command
that never queries (`mantle validate`) starts nothing, and one that does learns where the server
is then. Only the first connection of the process does so (embedded_db.ensure_running)."""

from __future__ import annotations

from typing import Any

from psycopg.conninfo import conninfo_to_dict

from mantle_site import embedded_db
from mantle_site.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        if not self.settings_dict["HOST"]:
            self.settings_dict["HOST"] = conninfo_to_dict(embedded_db.ensure_running())["host"]
        return super().get_connection_params()
