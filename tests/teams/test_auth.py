"""API-key authentication (teams/auth.py) as the API sees it (docs/api.md)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from executions.models import Execution
from teams.models import ApiKey
from teams.services import api_key_create, api_key_revoke

pytestmark = pytest.mark.django_db


class TestAuthentication:
    @pytest.mark.parametrize(
        "header",
        [None, "Bearer mk_" + "0" * 64, "Bearer nope", "Basic abc", "Bearer"],
        ids=["missing", "unknown", "malformed", "other-scheme", "empty"],
    )
    def test_it_is_401_json_without_a_valid_key(self, client, team, make_workflow, header):
        make_workflow(team)
        headers = {"Authorization": header} if header else {}
        response = client.post("/api/v1/run/deploy", headers=headers)
        assert response.status_code == 401
        assert response.json()["error"] in {"not_authenticated", "authentication_failed"}
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert not Execution.objects.exists()

    def test_a_revoked_key_is_401(self, client, team, make_workflow):
        make_workflow(team)
        api_key, key = api_key_create(team=team)
        api_key_revoke(api_key=api_key)
        response = client.post("/api/v1/run/deploy", headers={"Authorization": f"Bearer {key}"})
        assert (response.status_code, response.json()["detail"]) == (401, "revoked API key")

    def test_use_stamps_last_used_at_at_most_once_a_minute(self, client, team, make_workflow):
        make_workflow(team)
        api_key, key = api_key_create(team=team)
        headers = {"Authorization": f"Bearer {key}"}
        client.get("/api/v1/queues", headers=headers)
        first = ApiKey.objects.get(id=api_key.id).last_used_at
        client.get("/api/v1/queues", headers=headers)
        assert first is not None and first <= timezone.now()
        assert ApiKey.objects.get(id=api_key.id).last_used_at == first
