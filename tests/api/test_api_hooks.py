"""`POST /hooks/<path>` (docs/api.md, Webhooks)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from executions.models import Execution
from tests.api.conftest import hook, hook_yaml, sign
from tests.factories import ApiKeyFactory
from workflows.schema import WorkflowInvalid
from workflows.services import workflow_apply

pytestmark = pytest.mark.django_db


class TestAdmission:
    def test_the_payload_and_lower_cased_headers_land_in_the_trigger(self, team, make_hook):
        make_hook(team)
        response = hook(**{"X-GitHub-Event": "push", "Authorization": "Bearer secret"})
        assert response.status_code == 202
        execution = Execution.objects.get()
        assert response.json()["execution_id"] == str(execution.id)
        assert response["Location"] == f"/api/v1/executions/{execution.id}"
        trigger = execution.trigger
        assert (trigger["type"], trigger["path"], trigger["payload"]) == (
            "webhook",
            "/hooks/deploy",
            {"ref": "main"},
        )
        assert trigger["headers"]["x-github-event"] == "push"
        assert trigger["headers"]["content-type"] == "application/json"
        assert "authorization" not in trigger["headers"]

    def test_a_payload_that_is_not_json_lands_as_text(self, team, make_hook):
        make_hook(team)
        hook(body=b"hello \x00world", content_type="text/plain")
        assert Execution.objects.get().trigger["payload"] == "hello \ufffdworld"

    def test_nested_paths_are_matched_exactly(self, team, make_hook):
        make_hook(team, path="/hooks/ci/build")
        assert hook("/hooks/ci/build").status_code == 202
        assert hook("/hooks/ci").status_code == 404

    def test_it_queues_and_rejects_like_a_run(self, team, make_hook):
        make_hook(team, "q", "/hooks/q", limit=1)
        make_hook(team, "r", "/hooks/r", limit=1, on_limit="reject")
        hook("/hooks/q")
        assert hook("/hooks/q").json()["status"] == "queued"
        hook("/hooks/r")
        response = hook("/hooks/r")
        assert response.status_code == 429
        assert (response.json()["scope"], response.json()["limit"]) == ("workflow", 1)
        assert "Retry-After" not in response

    def test_an_idempotency_key_returns_the_original(self, team, make_hook):
        make_hook(team)
        first = hook(**{"Idempotency-Key": "delivery-1"})
        again = hook(**{"Idempotency-Key": "delivery-1"})
        assert (first.status_code, again.status_code) == (202, 200)
        assert first.json() == again.json()
        assert Execution.objects.count() == 1


class TestSignatures:
    def test_a_correct_signature_is_accepted(self, team, make_hook):
        make_hook(team, secret="s3cret")
        body = b'{"a": 1}'
        assert hook(body=body, secret="s3cret").status_code == 202

    @pytest.mark.parametrize("header", ["X-Hub-Signature-256", "X-Signature-256"])
    def test_the_hex_digest_is_compared_case_insensitively_under_either_header(
        self, team, make_hook, header
    ):
        make_hook(team, secret="s3cret")
        body = b'{"a": 1}'
        signature = "sha256=" + sign(body, "s3cret").removeprefix("sha256=").upper()
        assert hook(body=body, **{header: signature}).status_code == 202

    @pytest.mark.parametrize(
        "signature",
        [None, "sha256=00", "sha1=abc", sign(b"other body", "s3cret"), sign(b'{"a": 1}', "x")],
        ids=["missing", "short", "other-algorithm", "other-body", "other-secret"],
    )
    def test_a_bad_signature_is_403(self, team, make_hook, signature):
        make_hook(team, secret="s3cret")
        headers = {"X-Hub-Signature-256": signature} if signature else {}
        response = hook(body=b'{"a": 1}', **headers)
        assert (response.status_code, response.json()["error"]) == (403, "bad_signature")
        assert not Execution.objects.exists()


class TestFailures:
    def test_an_unknown_path_is_404_json(self, team, make_hook):
        make_hook(team)
        response = hook("/hooks/nope")
        assert (response.status_code, response.json()["error"]) == (404, "hook_not_found")

    def test_get_is_405_json(self, team, make_hook):
        make_hook(team)
        response = APIClient().get("/hooks/deploy")
        assert (response.status_code, response.json()["error"]) == (405, "method_not_allowed")

    def test_a_body_over_1_mib_is_413_and_admits_nothing(self, team, make_hook):
        make_hook(team)
        response = hook(body=b"x" * (1024 * 1024 + 1), content_type="text/plain")
        assert (response.status_code, response.json()["error"]) == (413, "payload_too_large")
        assert not Execution.objects.exists()

    def test_exactly_1_mib_is_accepted(self, team, make_hook):
        make_hook(team)
        assert hook(body=b"x" * (1024 * 1024), content_type="text/plain").status_code == 202


class TestPathsAcrossTeams:
    def test_a_path_used_by_another_teams_workflow_is_an_invalid_workflow(
        self, team, other_team, make_hook
    ):
        make_hook(team)
        with pytest.raises(WorkflowInvalid) as raised:
            workflow_apply(team=other_team, content=hook_yaml("other", "/hooks/deploy"))
        assert raised.value.errors[0].path == "triggers[0].path"
        assert "already used by another workflow" in raised.value.errors[0].message

    def test_a_workflow_keeps_its_own_path_across_versions(self, team, make_hook):
        make_hook(team)
        make_hook(team, limit=2)
        assert hook().status_code == 202

    def test_a_path_is_free_again_once_its_workflow_drops_it(self, team, other_team, make_hook):
        make_hook(team)
        make_hook(team, path="/hooks/moved")
        make_hook(other_team, "other", "/hooks/deploy")
        hook()
        assert Execution.objects.get().team == other_team

    def test_the_api_reports_the_conflict_as_400_invalid_workflow(self, team, other_api, make_hook):
        make_hook(team)
        response = other_api.put(
            "/api/v1/workflows/other",
            hook_yaml("other", "/hooks/deploy"),
            content_type="application/yaml",
        )
        assert response.status_code == 400
        assert response.json()["errors"][0]["path"] == "triggers[0].path"


class TestAuthentication:
    """A webhook is authenticated by default: a signed body, or an API key of its team;
    `auth: none` opens it (docs/hostile-input.md, Webhook authentication)."""

    def test_a_hook_without_a_secret_needs_an_api_key_of_its_team(
        self, team, other_team, make_hook
    ):
        make_hook(team, auth=None)
        for headers in ({}, {"Authorization": "Bearer mk_" + "0" * 64}, {"Authorization": "x"}):
            response = hook(**headers)
            assert (response.status_code, response.json()["error"]) == (401, "not_authenticated")
        other_key = ApiKeyFactory(team=other_team)[1]
        response = hook(Authorization=f"Bearer {other_key}")
        assert response.status_code == 401
        assert "needs an API key of its team" in response.json()["detail"]
        assert not Execution.objects.exists()
        response = hook(Authorization=f"Bearer {ApiKeyFactory(team=team)[1]}")
        assert response.status_code == 202
        assert "authorization" not in Execution.objects.get().trigger["headers"]

    def test_a_signed_hook_needs_the_signature_not_a_key(self, team, make_hook):
        make_hook(team, secret="s3cret")
        key = ApiKeyFactory(team=team)[1]
        assert hook(Authorization=f"Bearer {key}").status_code == 403
        assert hook(secret="s3cret").status_code == 202

    def test_auth_none_admits_anyone(self, team, make_hook):
        make_hook(team, auth="none")
        assert hook().status_code == 202

    @pytest.mark.parametrize(
        ("trigger", "message"),
        [
            ("auth: anonymous", 'must be "none"'),
            ("auth: none\n    secret: s", "exclude each other"),
        ],
    )
    def test_auth_takes_none_alone(self, team, trigger, message):
        content = hook_yaml("w", "/hooks/w", auth=None).replace(
            "path: /hooks/w\n", f"path: /hooks/w\n    {trigger}\n"
        )
        with pytest.raises(WorkflowInvalid) as raised:
            workflow_apply(team=team, content=content)
        assert [error.path for error in raised.value.errors] == ["triggers[0].auth"]
        assert message in raised.value.errors[0].message


def test_validate_warns_about_an_anonymous_hook_and_exits_0(tmp_path):
    open_hook = tmp_path / "open.yaml"
    open_hook.write_text(hook_yaml("w", "/hooks/w", auth="none"))
    keyed = tmp_path / "keyed.yaml"
    keyed.write_text(hook_yaml("k", "/hooks/k", auth=None))
    out, err = StringIO(), StringIO()
    call_command("mantle_validate", str(open_hook), str(keyed), stdout=out, stderr=err)
    assert err.getvalue().splitlines() == [
        f"{open_hook}:warning: line 7: triggers[0].auth: the webhook /hooks/w accepts anonymous "
        "callers (auth: none); give it a secret or let callers send an API key"
    ]
    assert out.getvalue().count(": ok (") == 2
