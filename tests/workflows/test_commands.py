from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from teams.models import Team
from tests.commands import EXAMPLES, exit_code, run
from tests.factories import workflow_yaml
from workflows.models import WorkflowDefinition


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
def test_seed_demo_applies_the_examples(settings, tmp_path):
    settings.MANTLE_HOME = tmp_path  # its credentials file, not the project's
    run("mantle_seed_demo")
    team = Team.objects.get(slug="demo")
    names = set(team.workflows.values_list("name", flat=True))
    assert names == {p.stem for p in EXAMPLES.glob("*.yaml")}
    run("mantle_seed_demo")
    assert all(w.current_version.number == 1 for w in team.workflows.all())
