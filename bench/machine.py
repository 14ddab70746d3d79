"""The machine's description for RESULTS.md: CPU model, cores, RAM, PostgreSQL and Python."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def describe(*, server_label: str) -> dict[str, str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
        cursor.execute("SHOW synchronous_commit")
        synchronous_commit = cursor.fetchone()[0]
    return {
        "CPU": _cpu_model(),
        "Cores": str(os.cpu_count()),
        "RAM": _ram_gib(),
        "OS": platform.platform(),
        "PostgreSQL": f"{pg_version} ({server_label}, synchronous_commit={synchronous_commit})",
        "Python": platform.python_version(),
        # Ratios hold up on a shared machine; absolute rates do not.
        "Load average (1, 5, 15 min) at the end": ", ".join(f"{v:.2f}" for v in os.getloadavg()),
    }
