"""The request path's reads: an API key with the workflow it runs in one query, and a webhook by
its path."""

from __future__ import annotations

from executions.resolution import api_key_with_workflow, webhook_by_path
from teams.models import ApiKey
from teams.services import api_key_create
from tests.factories import workflow_yaml
from workflows.services import workflow_apply


def test_a_key_comes_with_its_teams_workflow_and_current_version_in_one_query(
    make_team, make_workflow, django_assert_num_queries
) -> None:
    team = make_team("acme")
    make_workflow(team, "deploy")
    second = workflow_apply(team=team, content=workflow_yaml("deploy", limit=3)).version
    _, key = api_key_create(team=team)
    with django_assert_num_queries(1):
        api_key, workflow = api_key_with_workflow(key_hash=ApiKey.hash(key), name="deploy")
        assert (api_key.team.slug, workflow.team.slug, workflow.name) == ("acme", "acme", "deploy")
        assert workflow.current_version.id == second.id
        assert workflow.current_version.max_parallel_executions == 3
    # The version's body loads when read.
    assert workflow.current_version.spec["name"] == "deploy"


def test_another_teams_workflow_or_an_unknown_key_is_not_found(make_team, make_workflow) -> None:
    mine, theirs = make_team("mine"), make_team("theirs")
    make_workflow(theirs, "deploy")
    _, key = api_key_create(team=mine)
    api_key, workflow = api_key_with_workflow(key_hash=ApiKey.hash(key), name="deploy")
    assert (api_key.team.slug, workflow) == ("mine", None)
    assert api_key_with_workflow(key_hash=ApiKey.hash("mk_" + "0" * 64), name="deploy") == (
        None,
        None,
    )


def test_a_webhook_is_found_by_its_path_and_moves_with_the_current_version(
    make_team, django_assert_num_queries
) -> None:
    team = make_team("acme")
    hook = "triggers:\n  - type: webhook\n    path: /hooks/{}\n    secret: s3cret\n"
    workflow_apply(team=team, content=workflow_yaml("deploy", extra=hook.format("old")))
    workflow_apply(team=team, content=workflow_yaml("deploy", extra=hook.format("new")))
    assert webhook_by_path(path="/hooks/old") is None
    with django_assert_num_queries(1):
        found = webhook_by_path(path="/hooks/new")
        assert (found.workflow.team.slug, found.workflow.name, found.secret) == (
            "acme",
            "deploy",
            "s3cret",
        )
        assert found.workflow.current_version.number == 2
