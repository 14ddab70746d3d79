from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from mantle_site.config import ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mantle.yaml"
    path.write_text(text)
    return path


def test_every_key_is_optional(tmp_path):
    config = load_config(write(tmp_path, ""), environ={})
    assert config.engine.max_concurrent_executions_per_team == 0
    assert config.engine.queue_poll_interval == 30.0
    assert config.server.bind == "127.0.0.1:8000"
    assert config.database.url is None


def test_it_reads_the_documented_keys(tmp_path):
    path = write(
        tmp_path,
        "database:\n  url: postgresql://u@127.0.0.1:5432/m\n"
        "engine:\n  max_concurrent_executions_per_team: 50\n  queue_poll_interval: 30s\n"
        "  step_lease: 1m\n  reaper_interval: 500ms\nserver:\n  bind: 0.0.0.0:9000\n",
    )
    config = load_config(path, environ={})
    assert config.database.url == "postgresql://u@127.0.0.1:5432/m"
    assert config.engine.max_concurrent_executions_per_team == 50
    assert (config.engine.step_lease, config.engine.reaper_interval) == (60.0, 0.5)
    assert config.server.bind == "0.0.0.0:9000"


def test_environment_variables_override_the_file(tmp_path):
    path = write(tmp_path, "engine:\n  max_concurrent_executions_per_team: 50\n")
    config = load_config(
        path,
        environ={
            "MANTLE_ENGINE_MAX_CONCURRENT_EXECUTIONS_PER_TEAM": "7",
            "MANTLE_SERVER_BIND": "127.0.0.1:9001",
        },
    )
    assert config.engine.max_concurrent_executions_per_team == 7
    assert config.server.bind == "127.0.0.1:9001"


def test_the_direct_url_is_optional_and_overridable(tmp_path):
    path = write(tmp_path, "database:\n  url: postgresql://u@pgbouncer:6432/m\n")
    assert load_config(path, environ={}).database.direct_url is None
    config = load_config(
        path, environ={"MANTLE_DATABASE_DIRECT_URL": "postgresql://u@10.0.0.2:5432/m"}
    )
    assert config.database.url == "postgresql://u@pgbouncer:6432/m"
    assert config.database.direct_url == "postgresql://u@10.0.0.2:5432/m"


def test_mantle_config_names_the_file(tmp_path):
    path = write(tmp_path, "engine:\n  step_lease: 5s\n")
    assert load_config(environ={"MANTLE_CONFIG": str(path)}).engine.step_lease == 5.0
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(environ={"MANTLE_CONFIG": str(tmp_path / "missing.yaml")})


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("engine:\n  max_concurent: 5\n", "engine.max_concurent"),
        ("engin:\n  step_lease: 5s\n", "engin"),
        (
            "engine:\n  max_concurrent_executions_per_team: -1\n",
            "max_concurrent_executions_per_team",
        ),
        (
            "engine:\n  max_concurrent_executions_per_team: lots\n",
            "max_concurrent_executions_per_team",
        ),
        ("engine:\n  queue_poll_interval: soon\n", "engine.queue_poll_interval"),
        ("server:\n  bind: localhost\n", "server.bind"),
        ("database:\n  url: mysql://x\n", "database.url"),
        ("database:\n  direct_url: redis://x\n", "database.direct_url"),
        ("engine: 5\n", "engine"),
        ("engine:\n  http:\n    allow: [10.0.0.0/33]\n", "engine.http"),
        ("engine:\n  http:\n    deny: [not a host]\n", "engine.http"),
        ("engine:\n  http:\n    allow: 10.0.0.0/8\n", "engine.http"),
        ("engine:\n  http:\n    proxy: x\n", "engine.http"),
    ],
)
def test_a_bad_key_or_value_names_the_key(tmp_path, text, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_config(write(tmp_path, text), environ={})


def test_a_bad_environment_value_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"engine\.step_lease"):
        load_config(write(tmp_path, ""), environ={"MANTLE_ENGINE_STEP_LEASE": "-3s"})


def test_the_egress_policy_reads_networks_hosts_and_a_body_cap(tmp_path):
    path = write(
        tmp_path,
        "engine:\n  http:\n    allow: [10.1.0.0/16, 192.168.1.7, Internal.Example.com.]\n"
        "    deny: ['*.corp']\n    max_response_bytes: 2048\n",
    )
    http = load_config(path, environ={}).engine.http
    assert http.allow == (
        ipaddress.ip_network("10.1.0.0/16"),
        ipaddress.ip_network("192.168.1.7/32"),
        "internal.example.com",
    )
    assert (http.deny, http.max_response_bytes) == (("*.corp",), 2048)
    from_env = load_config(
        write(tmp_path, ""), environ={"MANTLE_ENGINE_HTTP": "{allow: ['::1']}"}
    ).engine.http
    assert from_env.allow == (ipaddress.ip_network("::1/128"),)
    assert load_config(write(tmp_path, ""), environ={}).engine.http.max_response_bytes == 1048576


def test_web_workers_default_to_two_sync_processes_per_core(tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    server = load_config(write(tmp_path, ""), environ={}).server
    assert (server.workers, server.threads) == (6, 1)


def test_web_workers_and_threads_come_from_the_file_or_the_environment(tmp_path):
    path = write(tmp_path, "server:\n  workers: 3\n  threads: 8\n")
    assert load_config(path, environ={}).server.threads == 8
    server = load_config(path, environ={"MANTLE_SERVER_THREADS": "2"}).server
    assert (server.workers, server.threads) == (3, 2)
    with pytest.raises(ConfigError, match=r"server\.threads"):
        load_config(path, environ={"MANTLE_SERVER_THREADS": "0"})


def test_step_workers_default_to_a_thousand_slots_and_one_per_core_at_least(tmp_path, monkeypatch):
    engine = load_config(write(tmp_path, ""), environ={}).engine
    assert engine.workers * engine.slots_per_worker >= 1000
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert load_config(write(tmp_path, ""), environ={}).engine.workers == 16


def test_the_access_log_is_off_unless_the_file_or_the_environment_turns_it_on(tmp_path):
    assert load_config(write(tmp_path, ""), environ={}).server.access_log is False
    path = write(tmp_path, "server:\n  access_log: true\n")
    assert load_config(path, environ={}).server.access_log is True
    environ = {"MANTLE_SERVER_ACCESS_LOG": "off"}
    assert load_config(path, environ=environ).server.access_log is False
    with pytest.raises(ConfigError, match=r"server\.access_log"):
        load_config(path, environ={"MANTLE_SERVER_ACCESS_LOG": "sometimes"})
