"""Content negotiation (api/negotiation.py): the usual Accept headers are answered in JSON
without DRF's negotiation, and any other is still negotiated by it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "application/*"])
def test_json_is_answered_to_what_accepts_it(api, team, accept):
    headers = {"Accept": accept} if accept else {}
    response = api.get("/api/v1/workflows", headers=headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("accept", ["text/html", ""])
def test_what_does_not_accept_json_is_406_in_json(api, team, accept):
    response = api.get("/api/v1/workflows", headers={"Accept": accept})
    assert response.status_code == 406
    assert response.json()["error"]


def test_a_format_the_api_does_not_render_is_404_in_json(api, team):
    response = api.get("/api/v1/workflows?format=xml")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert api.get("/api/v1/workflows?format=json").status_code == 200
