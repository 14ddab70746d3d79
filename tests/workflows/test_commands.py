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
    bad.write_text(
        "name: bad\nsteps:\n  - name: x\n    action: test/noop\n    continue_on_error: 1\n"
    )
    with pytest.raises(CommandError) as raised:
        call_command("mantle_validate", str(bad), str(EXAMPLES / "hello.yaml"))
    assert raised.value.returncode == 1
    err = capsys.readouterr().err
    assert f"{bad}:line 5: steps[0].continue_on_error: must be true or false" in err


# Upstream's own reference example: max_parallel on a step without for_each, and an input its
# steps read but do not declare.
UPSTREAM_STYLE = """\
name: upstream
steps:
  - name: x
    action: test/echo
    max_parallel: 3
    params: {who: "{{ inputs.customer }}"}
"""
UPSTREAM_WARNINGS = [
    "line 5: steps[0].max_parallel: is ignored: it bounds the branches of a for_each, and this"
    " step has none",
    'line 6: steps[0].params.who: expression "inputs.customer": undeclared input "customer"'
    " (accepted: inputs are an open map; declare it in inputs)",
]


def test_validate_prints_warnings_and_exits_0(tmp_path, capsys):
    path = tmp_path / "upstream.yaml"
    path.write_text(UPSTREAM_STYLE)
    call_command("mantle_validate", str(path))
    out, err = capsys.readouterr()
    assert out == f"{path}: ok (upstream, 1 steps)\n"
    assert err.splitlines() == [f"{path}:warning: {warning}" for warning in UPSTREAM_WARNINGS]


def test_validate_strict_makes_the_warnings_errors_and_exits_1(tmp_path, capsys):
    path = tmp_path / "upstream.yaml"
    path.write_text(UPSTREAM_STYLE)
    with pytest.raises(CommandError) as raised:
        call_command("mantle_validate", "--strict", str(path))
    assert raised.value.returncode == 1
    out, err = capsys.readouterr()
    assert "ok" not in out
    assert [line for line in err.splitlines() if line.startswith(str(path))] == [
        f"{path}:{warning}" for warning in UPSTREAM_WARNINGS
    ]


@pytest.mark.django_db
def test_apply_prints_the_warnings_and_applies(team, tmp_path, capsys):
    path = tmp_path / "upstream.yaml"
    path.write_text(UPSTREAM_STYLE)
    call_command("mantle_apply", str(path), "--team", "acme")
    out, err = capsys.readouterr()
    assert out == "upstream v1 created\n"
    assert err.splitlines() == [f"{path}:warning: {warning}" for warning in UPSTREAM_WARNINGS]
    assert WorkflowDefinition.objects.get(name="upstream").current_version.number == 1


@pytest.mark.django_db
def test_seed_demo_applies_the_examples(settings, tmp_path):
    settings.MANTLE_HOME = tmp_path  # its credentials file, not the project's
    run("mantle_seed_demo")
    team = Team.objects.get(slug="demo")
    names = set(team.workflows.values_list("name", flat=True))
    assert names == {p.stem for p in EXAMPLES.glob("*.yaml")}
    run("mantle_seed_demo")
    assert all(w.current_version.number == 1 for w in team.workflows.all())
