from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import get_commands
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from mantle_site import cli
from tests.processes import CONFIG


def mantle(
    *args: str, database_url: str, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    mantle_script = Path(sys.executable).with_name("mantle")
    env = {**os.environ, **CONFIG, "DATABASE_URL": database_url}
    if home is not None:
        env["MANTLE_HOME"] = str(home)
    return subprocess.run(
        [str(mantle_script), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_console_script_exit_codes(test_database_url, team, make_workflow):
    make_workflow(team, limit=1, on_limit="reject")
    admitted = mantle("run", "deploy", "--team", "acme", database_url=test_database_url)
    assert admitted.returncode == 0, admitted.stderr
    assert admitted.stdout.split()[1] == "pending"
    rejected = mantle("run", "deploy", "--team", "acme", database_url=test_database_url)
    assert rejected.returncode == 3
    assert "workflow concurrency limit of 1" in rejected.stderr
    unknown = mantle("run", "nope", "--team", "acme", database_url=test_database_url)
    assert unknown.returncode == 2
    assert mantle("frobnicate", database_url=test_database_url).returncode == 2
    status = mantle("status", admitted.stdout.split()[0], database_url=test_database_url)
    assert status.stdout.splitlines()[0] == "pending"
    short = mantle("status", admitted.stdout[:8], database_url=test_database_url)  # as shown
    assert short.stdout == status.stdout


def test_a_cli_rejection_is_counted_where_the_local_server_scrapes(
    test_database_url, team, make_workflow, tmp_path
):
    (tmp_path / "metrics").mkdir()  # what `mantle serve` prepares under MANTLE_HOME
    make_workflow(team, limit=1, on_limit="reject")
    for expected in (0, 3):
        done = mantle(
            "run", "deploy", "--team", "acme", database_url=test_database_url, home=tmp_path
        )
        assert done.returncode == expected, done.stderr
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path / "metrics"))
    labels = {"team": "acme", "workflow": "deploy", "scope": "workflow"}
    assert registry.get_sample_value("mantle_executions_rejected_total", labels) == 1


def test_a_bad_config_stops_the_console_script_with_the_key_named(tmp_path):
    config = tmp_path / "mantle.yaml"
    config.write_text("engine:\n  max_concurent: 5\n")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("mantle")), "teams", "list"],
        env={**os.environ, "MANTLE_CONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "configuration error: unknown key 'engine.max_concurent'" in done.stderr
    assert "Traceback" not in done.stderr


def mantle_elsewhere(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`mantle …` from a directory outside the project, no database configured."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "MANTLE_HOME"}}
    return subprocess.run(
        [str(Path(sys.executable).with_name("mantle")), *args],
        env={**env, **CONFIG},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_outside_the_project_validate_needs_no_database_and_the_rest_refuse(tmp_path):
    workflow = tmp_path / "hello.yaml"
    workflow.write_text("name: hello\nsteps:\n  - name: only\n    action: test/noop\n")
    validated = mantle_elsewhere(tmp_path, "validate", str(workflow))
    assert (validated.returncode, validated.stdout) == (0, f"{workflow}: ok (hello, 1 steps)\n")
    refused = mantle_elsewhere(tmp_path, "teams", "list")
    assert refused.returncode == 2
    [line] = refused.stderr.splitlines()
    assert f"no embedded PostgreSQL at {tmp_path / '.mantle' / 'pgdata'}" in line
    assert list(tmp_path.iterdir()) == [workflow]  # no .mantle/, no server started


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """`mantle …` run in this process: its SIGTERM handler and environment undone after."""
    monkeypatch.setenv("MANTLE_HOME", str(tmp_path))
    handler = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, handler)


def help_of(*args: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main(list(args))
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_command_with_one_line(in_process, capsys):
    lines = help_of("--help", capsys=capsys).splitlines()
    assert lines[0].startswith("usage: mantle <command>")
    listed = [line.split()[0] for line in lines[lines.index("commands:") + 1 :]]
    assert listed == list(cli.COMMANDS)
    internal = {"mantle_worker", "mantle_clock"}  # `mantle serve`'s children
    ours = {name for name in get_commands() if name.startswith("mantle_")} - internal
    assert ours <= {command for command, _ in cli.COMMANDS.values()}


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_a_usage_line_names_the_command_once_without_djangos_options(name, in_process, capsys):
    text = help_of(name, "--help", capsys=capsys)
    assert text.startswith(f"usage: mantle {name} [-h]")
    assert "mantle_" not in text
    hidden = cli.GENERIC_OPTIONS - ({"--verbosity"} if name == "migrate" else set())
    assert [option for option in hidden if option in text] == []


def test_help_of_a_sub_command_names_both(in_process, capsys):
    assert help_of("limits", "list", "--help", capsys=capsys).startswith(
        "usage: mantle limits list [-h] team"
    )
    assert help_of("help", "status", capsys=capsys).startswith("usage: mantle status")
