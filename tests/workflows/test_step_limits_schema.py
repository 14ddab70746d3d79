"""A step's `limits:` and `rate_limit:` (docs/limits.md, Step scope), checked when applied:
names of the team's own or global limits and rates, units an integer >= 1 and within the max, a
rate's key over inputs and trigger, each error with its path and line; nothing written when
invalid."""

from __future__ import annotations

import textwrap
import uuid
from datetime import timedelta

import pytest

from teams.models import Team
from teams.services import named_limit_set, named_rate_set, team_create
from workflows.models import WorkflowDefinition
from workflows.schema import StepSpec, WorkflowInvalid, WorkflowSpec
from workflows.schema.spec import StepLimit, StepRate
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db


def document(limits: str) -> str:
    return textwrap.dedent(f"""\
        name: charge
        steps:
          - name: call
            action: test/noop
            limits: {limits}
        """)


@pytest.fixture
def team() -> Team:
    team = team_create(slug=f"t-{uuid.uuid4().hex[:8]}")
    named_limit_set(team=team, name="stripe-api", max=10)
    named_limit_set(team=team, name="gpu", max=2)
    return team


def errors(team: Team, limits: str) -> list[tuple[int | None, str, str]]:
    with pytest.raises(WorkflowInvalid) as caught:
        workflow_apply(team=team, content=document(limits))
    assert not WorkflowDefinition.objects.filter(team=team).exists()
    return [(e.line, e.path, e.message) for e in caught.value.errors]


def test_names_and_units_are_stored_in_name_order(team: Team) -> None:
    applied = workflow_apply(team=team, content=document("[stripe-api, {name: gpu, units: 2}]"))
    spec = WorkflowSpec.from_dict(applied.version.spec)
    assert spec.steps[0].limits == (StepLimit("gpu", 2), StepLimit("stripe-api", 1))


def test_a_global_limit_may_be_listed_and_a_team_limit_shadows_it(team: Team) -> None:
    named_limit_set(team=None, name="prod-db", max=5)
    named_limit_set(team=None, name="gpu", max=1)  # the team's gpu (max 2) wins
    applied = workflow_apply(team=team, content=document("[prod-db, {name: gpu, units: 2}]"))
    spec = WorkflowSpec.from_dict(applied.version.spec)
    assert spec.steps[0].limits == (StepLimit("gpu", 2), StepLimit("prod-db", 1))


def test_an_unknown_name_is_an_error_at_its_line(team: Team) -> None:
    assert errors(team, "[stripe-api, nope]") == [
        (5, "steps[0].limits[1]", "unknown named limit 'nope' (mantle limits set <team> nope <N>)")
    ]


def test_units_above_the_max_can_never_run_an_error(team: Team) -> None:
    [(line, path, message)] = errors(team, "[{name: gpu, units: 3}]")
    assert (line, path) == (5, "steps[0].limits[0].units")
    assert message == "3 units of 'gpu', over its max of 2: the step could never run"


@pytest.mark.parametrize(
    ("limits", "path", "message"),
    [
        ("[{name: gpu, units: 0}]", "steps[0].limits[0].units", "must be an integer >= 1"),
        ("[{name: gpu, units: true}]", "steps[0].limits[0].units", "must be an integer >= 1"),
        ("[gpu, gpu]", "steps[0].limits[1]", "named limit 'gpu' is listed twice"),
        ("[{name: gpu, size: 1}]", "steps[0].limits[0].size", 'unknown key "size"'),
        ("gpu", "steps[0].limits", "must be a list of named limits: a name or {name, units}"),
    ],
)
def test_bad_entries_are_errors_with_their_path(
    team: Team, limits: str, path: str, message: str
) -> None:
    assert (path, message) in [(p, m) for _, p, m in errors(team, limits)]


def test_a_spec_stored_before_step_limits_reads_as_none() -> None:
    stored = StepSpec(name="a", action="test/noop").to_dict()
    del stored["limits"]
    assert StepSpec.from_dict(stored).limits == ()


def rated(rate: str) -> str:
    return textwrap.dedent(f"""\
        name: charge
        inputs: {{customer: {{type: string}}}}
        steps:
          - name: call
            action: test/noop
            rate_limit: {rate}
        """)


@pytest.mark.parametrize(
    ("rate", "path", "message"),
    [
        ("{units: 1}", "steps[0].rate_limit.name", "is required"),
        ("{name: nope}", "steps[0].rate_limit.name", "unknown named rate 'nope'"),
        (
            "{name: stripe-calls, units: 6}",
            "steps[0].rate_limit.units",
            "6 units of 'stripe-calls', over its max of 5",
        ),
        (
            '{name: stripe-calls, key: "{{ steps.x.output }}"}',
            "steps[0].rate_limit.key",
            "not in scope here",
        ),
    ],
)
def test_a_bad_rate_limit_is_an_error_at_its_path(
    team: Team, rate: str, path: str, message: str
) -> None:
    named_rate_set(team=team, name="stripe-calls", max=5, period=timedelta(seconds=1))
    with pytest.raises(WorkflowInvalid) as caught:
        workflow_apply(team=team, content=rated(rate))
    found = [(e.path, e.message) for e in caught.value.errors]
    assert any(p == path and message in m for p, m in found), found
    assert all(e.line == 6 for e in caught.value.errors)


def test_a_rate_limit_is_stored_with_its_units_and_key(team: Team) -> None:
    named_rate_set(team=None, name="stripe-calls", max=5, period=timedelta(seconds=1))
    content = rated('{name: stripe-calls, units: 2, key: "{{ inputs.customer }}"}')
    spec = WorkflowSpec.from_dict(workflow_apply(team=team, content=content).version.spec)
    assert spec.steps[0].rate == StepRate("stripe-calls", 2, "{{ inputs.customer }}")


def test_a_rate_key_reading_an_undeclared_input_is_a_warning(team: Team) -> None:
    named_rate_set(team=team, name="stripe-calls", max=5, period=timedelta(seconds=1))
    applied = workflow_apply(
        team=team, content=rated('{name: stripe-calls, key: "{{ inputs.nobody }}"}')
    )
    assert [w.path for w in applied.warnings] == ["steps[0].rate_limit.key"]
    assert "nobody" in applied.warnings[0].message
