"""mantle.yaml → a typed, validated configuration (docs/operations.md, Configuration).

Read from $MANTLE_CONFIG, else ./mantle.yaml. Every key is optional; `MANTLE_<SECTION>_<KEY>`
environment variables override the file. An unknown key or a bad value raises ConfigError naming
the key, which stops start-up.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.bounds import MAX_COUNT, duration_problem
from core.durations import parse_duration, parse_retention
from engine.egress import HostOrNetwork, HttpConfig


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class DatabaseConfig:
    url: str | None = None
    # What the LISTEN connections and the engine clock's session lock use, when `url` goes
    # through a transaction pooler (PgBouncer) that cannot carry them; default: `url`.
    direct_url: str | None = None


# Steps one `mantle serve` runs at once with the default slots_per_worker (100): the default
# number of step workers gives it that many slots (README, "The worker model").
DEFAULT_STEP_CAPACITY = 1000


def _default_workers() -> int:
    """Enough step-worker processes for DEFAULT_STEP_CAPACITY slots, and one per core at least
    (each runs its slots on one event loop, one core)."""
    return max(os.cpu_count() or 1, DEFAULT_STEP_CAPACITY // EngineConfig.slots_per_worker)


@dataclass(frozen=True)
class EngineConfig:
    max_concurrent_executions_per_team: int = 0
    queue_poll_interval: float = 30.0
    step_lease: float = 60.0
    reaper_interval: float = 30.0
    workers: int = field(default_factory=_default_workers)  # step-worker processes per serve
    slots_per_worker: int = 100  # steps one step-worker process runs at once
    broker: str = "orm"  # django-q2's broker (schedules); steps never go through it
    http: HttpConfig = field(default_factory=HttpConfig)
    # Request headers never stored in a webhook's trigger (fnmatch patterns, lower case).
    redact_headers: tuple[str, ...] = (
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-api-key",
        "x-*-token",
        "x-hub-signature*",
        "x-signature-256",
    )


def _default_web_workers() -> int:
    # Measured on 2 cores (README, "Web workers"): a request waits on PostgreSQL for most of its
    # time, so two sync processes per core keep the cores busy; more only add contention.
    return 2 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class ServerConfig:
    bind: str = "127.0.0.1:8000"
    workers: int = field(default_factory=_default_web_workers)
    # Per gunicorn worker. Above 1, gunicorn runs its gthread worker, which does not stop a
    # request that runs past its `timeout` (the sync worker does: 503 request_timeout).
    threads: int = 1
    # Seconds a client has to send its whole request (head and body) before it is answered 408
    # (mantle_site/web_worker.py): until then it holds no web worker (docs/hostile-input.md).
    read_timeout: float = 30.0
    # One line per request on standard output (gunicorn's own default: none). Off, as a web
    # worker spends 8 % of its CPU writing it (figure 2, README "Web workers").
    access_log: bool = False


@dataclass(frozen=True)
class LimitsConfig:
    """What one workflow may cost, whoever wrote it (README: hostile input)."""

    expression_length: int = 10_000  # characters of one {{ … }}
    expression_depth: int = 100  # nesting of its syntax tree (an upper bound, see below)
    expression_nodes: int = 2_000  # tokens of one expression
    expression_cost: int = 10_000_000  # estimated steps of one evaluation
    # the same for the expressions admission evaluates on a web worker (concurrency_key, priority)
    admission_expression_cost: int = 100_000
    workflow_steps: int = 1_000
    document_depth: int = 32  # nesting of the YAML document
    step_output_bytes: int = 1024 * 1024  # a step's output as JSON
    fanout_items: int = 10_000  # branches of one for_each step


@dataclass(frozen=True)
class RetentionConfig:
    """How long finished executions are kept (docs/operations.md, Retention), in seconds; 0
    keeps them for ever. `failed` covers failed, cancelled and timed_out."""

    completed: float = 30 * 86_400.0
    failed: float = 90 * 86_400.0


@dataclass(frozen=True)
class Config:
    database: DatabaseConfig = field(default_factory=DatabaseConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    env: dict[str, str] = field(default_factory=dict)  # what workflows read as env.<NAME>


def _non_negative_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    number = int(value)
    if not 0 <= number <= MAX_COUNT:
        raise ValueError(f"expected an integer from 0 to {MAX_COUNT}, got {value!r}")
    return number


def _duration(value: object) -> float:
    seconds = parse_duration(value)  # type: ignore[arg-type]
    problem = duration_problem(seconds)
    if problem:
        raise ValueError(f"{value!r} {problem}")
    return seconds


def _bool(value: object) -> bool:
    """YAML's booleans, or their spelling in the environment."""
    if isinstance(value, bool):
        return value
    spelled = str(value).strip().lower()
    if spelled in ("true", "yes", "on", "1"):
        return True
    if spelled in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _positive_int(value: object) -> int:
    number = _non_negative_int(value)
    if number == 0:
        raise ValueError("expected an integer >= 1, got 0")
    return number


def _bind(value: object) -> str:
    host, sep, port = str(value).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port, got {value!r}")
    return str(value)


def _broker(value: object) -> str:
    text = str(value)
    if text != "orm" and not text.startswith(("redis://", "rediss://")):
        raise ValueError(f"expected 'orm' or a redis:// URL, got {value!r}")
    return text


_HOST = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


def _host_or_network(value: object) -> HostOrNetwork:
    text = str(value).strip().lower().rstrip(".")
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        pass
    if not _HOST.fullmatch(text):
        raise ValueError(f"expected a CIDR, an address or a host name, got {value!r}")
    return text


def _http(value: object) -> HttpConfig:
    # From the environment (MANTLE_ENGINE_HTTP) the mapping comes as YAML text.
    if isinstance(value, str):
        value = yaml.safe_load(value)
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping with allow, deny, max_response_bytes, got {value!r}")
    parsed: dict[str, Any] = {}
    for key, entries in value.items():
        if key == "max_response_bytes":
            parsed[key] = _positive_int(entries)
        elif key in {"allow", "deny"}:
            if not isinstance(entries, list):
                raise ValueError(f"{key}: expected a list, got {entries!r}")
            parsed[key] = tuple(_host_or_network(entry) for entry in entries)
        else:
            raise ValueError(f"unknown key {key!r}")
    return HttpConfig(**parsed)


def _header_patterns(value: object) -> tuple[str, ...]:
    # From the environment (MANTLE_ENGINE_REDACT_HEADERS) the list comes comma-separated.
    entries = value.split(",") if isinstance(value, str) else value
    if not isinstance(entries, list | tuple) or not all(isinstance(e, str) for e in entries):
        raise ValueError(f"expected a list of header names or patterns, got {value!r}")
    return tuple(entry.strip().lower() for entry in entries if entry.strip())


def _positive_duration(value: object) -> float:
    seconds = parse_duration(value)  # type: ignore[arg-type]
    if seconds <= 0:
        raise ValueError(f"expected a duration above 0, got {value!r}")
    return seconds


def _url(value: object) -> str:
    text = str(value)
    if not text.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"expected a postgresql:// URL, got {value!r}")
    return text


_PARSERS: dict[str, dict[str, Any]] = {
    "database": {"url": _url, "direct_url": _url},
    "engine": {
        "max_concurrent_executions_per_team": _non_negative_int,
        "queue_poll_interval": _duration,
        "step_lease": _duration,
        "reaper_interval": _duration,
        "workers": _positive_int,
        "slots_per_worker": _positive_int,
        "broker": _broker,
        "http": _http,
        "redact_headers": _header_patterns,
    },
    "server": {
        "bind": _bind,
        "workers": _positive_int,
        "threads": _positive_int,
        "read_timeout": _positive_duration,
        "access_log": _bool,
    },
    "limits": {name: _positive_int for name in LimitsConfig.__dataclass_fields__},
    "retention": {"completed": parse_retention, "failed": parse_retention},
}
_SECTIONS = {
    "database": DatabaseConfig,
    "engine": EngineConfig,
    "server": ServerConfig,
    "limits": LimitsConfig,
    "retention": RetentionConfig,
}


def _read_file(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return raw


def _env_overrides(environ: dict[str, str]) -> dict[str, dict[str, str]]:
    overrides: dict[str, dict[str, str]] = {}
    for section, keys in _PARSERS.items():
        for key in keys:
            name = f"MANTLE_{section}_{key}".upper()
            if name in environ:
                overrides.setdefault(section, {})[key] = environ[name]
    return overrides


def load_config(path: Path | None = None, environ: dict[str, str] | None = None) -> Config:
    environ = dict(os.environ) if environ is None else environ
    if path is None:
        path = Path(environ.get("MANTLE_CONFIG", "mantle.yaml"))
        if "MANTLE_CONFIG" in environ and not path.exists():
            raise ConfigError(f"MANTLE_CONFIG points to {path}, which does not exist")
    raw = _read_file(path) if path.exists() else {}
    env = _workflow_env(raw.pop("env", None), environ)
    for section, values in _env_overrides(environ).items():
        raw.setdefault(section, {})
        if isinstance(raw[section], dict):
            raw[section].update(values)

    sections: dict[str, Any] = {}
    for section, values in raw.items():
        if section not in _PARSERS:
            raise ConfigError(f"unknown key {section!r} in {path}")
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"{section}: must be a mapping")
        parsed: dict[str, Any] = {}
        for key, value in values.items():
            parser = _PARSERS[section].get(key)
            if parser is None:
                raise ConfigError(f"unknown key '{section}.{key}'")
            try:
                parsed[key] = parser(value)
            except ValueError as exc:
                raise ConfigError(f"{section}.{key}: {exc}") from exc
        sections[section] = dataclasses.replace(_SECTIONS[section](), **parsed)
    return Config(**sections, env=env)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _workflow_env(values: object, environ: dict[str, str]) -> dict[str, str]:
    """mantle.yaml's `env:` overlaid by MANTLE_ENV_<NAME> (upstream Mantle's rule): the only part
    of the server's environment a workflow can see."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError("env: must be a mapping of names to strings")
    env: dict[str, str] = {}
    for name, value in values.items():
        if not (isinstance(name, str) and _ENV_NAME.fullmatch(name)):
            raise ConfigError(f"env.{name}: must be a name like API_BASE_URL")
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, str | int | float):
            raise ConfigError(f"env.{name}: must be a string")
        env[name] = str(value)
    for variable, value in environ.items():
        name = variable.removeprefix("MANTLE_ENV_")
        if variable.startswith("MANTLE_ENV_") and _ENV_NAME.fullmatch(name):
            env[name] = value
    return env
