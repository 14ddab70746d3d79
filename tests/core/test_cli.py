from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from executions.models import Execution, Status
from executions.services.admission import admit
from teams.models import ApiKey, Team
from tests.conftest import workflow_yaml
from tests.processes import CONFIG
from workflows.models import WorkflowDefinition

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=out)
    return out.getvalue()


def exit_code(*args: str) -> int:
    with pytest.raises(CommandError) as raised:
        run(*args)
    return raised.value.returncode


@pytest.mark.django_db
class TestRun:
    def test_it_prints_the_id_and_status(self, team, make_workflow):
        make_workflow(team, limit=1)
        first = run("mantle_run", "deploy", "--team", "acme").split()
        second = run("mantle_run", "deploy", "--team", "acme").split()
        assert first[1] == "pending"
        assert second[1:3] == ["queued", "queue"]
        assert Execution.objects.get(id=second[0]).status == Status.QUEUED

    def test_a_rejection_exits_3_and_names_scope_and_limit(self, team, make_workflow):
        make_workflow(team, limit=1, on_limit="reject")
        run("mantle_run", "deploy", "--team", "acme")
        with pytest.raises(CommandError, match="workflow concurrency limit of 1") as raised:
            run("mantle_run", "deploy", "--team", "acme")
        assert raised.value.returncode == 3

    def test_force_bypasses_the_limit(self, team, make_workflow):
        make_workflow(team, limit=1, on_limit="reject")
        run("mantle_run", "deploy", "--team", "acme")
        assert run("mantle_run", "deploy", "--team", "acme", "--force").split()[1] == "pending"
        assert Execution.objects.get(forced=True).status == Status.PENDING

    def test_unknown_workflow_or_team_exits_2(self, team):
        assert exit_code("mantle_run", "nope", "--team", "acme") == 2
        assert exit_code("mantle_run", "nope", "--team", "nobody") == 2

    def test_inputs_are_typed_by_the_declaration(self, team, make_workflow):
        make_workflow(
            team,
            extra="inputs:\n  count:\n    type: number\n  dry:\n    type: boolean\n"
            "  env:\n    type: string\n",
        )
        output = run(
            "mantle_run",
            "deploy",
            "--team",
            "acme",
            "--input",
            "count=3",
            "--input",
            "dry=true",
            "--input",
            "env=prod",
        )
        execution = Execution.objects.get(id=output.split()[0])
        assert execution.inputs == {"count": 3, "dry": True, "env": "prod"}
        assert exit_code("mantle_run", "deploy", "--team", "acme", "--input", "count=x") == 2
        assert exit_code("mantle_run", "deploy", "--team", "acme", "--input", "nokey") == 2


@pytest.mark.django_db
def test_status_prints_the_status_word_first(team, make_workflow):
    make_workflow(team, limit=1)
    admit(team=team, workflow=WorkflowDefinition.objects.get())
    queued = admit(team=team, workflow=WorkflowDefinition.objects.get()).execution
    lines = run("mantle_status", str(queued.id)).splitlines()
    assert lines[0] == "queued"
    assert lines[1] == "queue position 1, blocked by workflow"


@pytest.mark.django_db
def test_cancel_exits_0_then_1_on_a_terminal_execution(team, make_workflow):
    execution = admit(team=team, workflow=make_workflow(team)).execution
    assert "cancelled" in run("mantle_cancel", str(execution.id))
    assert exit_code("mantle_cancel", str(execution.id)) == 1


@pytest.mark.django_db
def test_apply_versions_only_changed_content(team, tmp_path):
    path = tmp_path / "deploy.yaml"
    path.write_text(workflow_yaml(limit=1))
    assert run("mantle_apply", str(path), "--team", "acme").strip() == "deploy v1 created"
    assert run("mantle_apply", str(path), "--team", "acme").strip() == "deploy v1 unchanged"
    path.write_text(workflow_yaml(limit=2))
    assert run("mantle_apply", str(path), "--team", "acme").strip() == "deploy v2 updated"


@pytest.mark.django_db
def test_apply_writes_nothing_when_one_file_is_invalid(team, tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(workflow_yaml("good"))
    bad.write_text("name: bad\nsteps:\n  - name: x\n    action: nope/nope\n")
    assert exit_code("mantle_apply", str(good), str(bad), "--team", "acme") == 1
    assert not WorkflowDefinition.objects.exists()


def test_validate_prints_errors_with_line_numbers_and_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps:\n  - name: x\n    action: test/noop\n    max_parallel: 3\n")
    with pytest.raises(CommandError) as raised:
        call_command("mantle_validate", str(bad), str(EXAMPLES / "hello.yaml"))
    assert raised.value.returncode == 1
    err = capsys.readouterr().err
    assert f"{bad}:line 5: steps[0].max_parallel:" in err


@pytest.mark.django_db
def test_teams_create_set_limit_clear_and_list(engine_config):
    engine_config(max_concurrent_executions_per_team=50)
    assert run("mantle_teams", "create", "blue", "--max-concurrent", "5").strip() == (
        "blue created, limit 5"
    )
    run("mantle_teams", "set-limit", "blue", "9")
    assert Team.objects.get(slug="blue").max_concurrent_executions == 9
    run("mantle_teams", "set-limit", "blue", "--clear")
    assert Team.objects.get(slug="blue").max_concurrent_executions is None
    assert run("mantle_teams", "list").strip() == "blue\t50 (config default)"
    assert exit_code("mantle_teams", "set-limit", "nobody", "3") == 2


@pytest.mark.django_db
def test_keys_create_prints_the_key_once_and_stores_its_hash(team):
    key = run("mantle_keys", "create", "--team", "acme").strip()
    assert key.startswith("mk_") and len(key) == 67
    stored = ApiKey.objects.get()
    assert stored.key_hash == ApiKey.hash(key)
    assert key not in (stored.prefix, stored.key_hash)


@pytest.mark.django_db
def test_seed_demo_applies_the_examples(capsys):
    run("mantle_seed_demo")
    team = Team.objects.get(slug="demo")
    names = set(team.workflows.values_list("name", flat=True))
    assert names == {p.stem for p in EXAMPLES.glob("*.yaml")}
    run("mantle_seed_demo")
    assert all(w.current_version.number == 1 for w in team.workflows.all())


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
