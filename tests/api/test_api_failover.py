"""A web worker whose connection lands on a server that no longer takes writes (a standby after
a failover, reached through a pooler or a name still pointing at the old primary): 503
`database_unavailable`, never 500, and the next request connects anew. The server here is made
read-only for the session (`default_transaction_read_only`), as a hot standby is."""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.api.conftest import client_of

pytestmark = pytest.mark.django_db(transaction=True)


def read_only() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET default_transaction_read_only = on")


def test_a_write_on_a_read_only_server_is_503_and_the_next_one_reconnects(team, make_workflow):
    make_workflow(team)
    api = client_of(team)
    read_only()
    response = api.post("/api/v1/run/deploy", {}, format="json")
    assert (response.status_code, response.json()["error"]) == (503, "database_unavailable")
    assert connection.connection is None
    assert api.post("/api/v1/run/deploy", {}, format="json").status_code == 202


def test_readyz_reports_a_read_only_server_then_the_writable_one() -> None:
    client = APIClient()
    assert client.get("/readyz").status_code == 200
    read_only()
    response = client.get("/readyz")
    assert (response.status_code, response.json()["error"]) == (503, "database_unavailable")
    assert client.get("/readyz").status_code == 200
