"""Fixtures of the API tests: API clients authenticated as a team, and hook workflows."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from teams.models import Team
from tests.factories import ApiKeyFactory, workflow_yaml
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply


def client_of(team: Team) -> APIClient:
    _, key = ApiKeyFactory(team=team)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def api(team: Team) -> APIClient:
    """A client with an API key of the team `acme`."""
    return client_of(team)


@pytest.fixture
def other_team(make_team: Callable[..., Team]) -> Team:
    return make_team("globex")


@pytest.fixture
def other_api(other_team: Team) -> APIClient:
    return client_of(other_team)


def sign(body: bytes, secret: str) -> str:
    """The X-Hub-Signature-256 header of `body` under the hook's `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def hook(
    path: str = "/hooks/deploy",
    body: bytes = b'{"ref": "main"}',
    content_type: str = "application/json",
    secret: str | None = None,
    **headers: str,
) -> Any:
    """POST a webhook as a sender does: no API key; signed when given the hook's `secret`."""
    if secret is not None:
        headers["X-Hub-Signature-256"] = sign(body, secret)
    return APIClient().post(path, body, content_type=content_type, headers=headers)


def hook_yaml(
    name: str, path: str, *, secret: str | None = None, auth: str | None = "none", **kwargs: object
) -> str:
    """A workflow with a webhook trigger: signed with `secret`, else open to anyone (`auth: none`,
    what the tests of anonymous callers need) unless `auth=None` asks for the team's API key."""
    trigger = f"  - type: webhook\n    path: {path}\n"
    if secret is not None:
        trigger += f"    secret: {secret}\n"
    elif auth is not None:
        trigger += f"    auth: {auth}\n"
    return workflow_yaml(name, extra=f"triggers:\n{trigger}", **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def make_hook(db: None) -> Callable[..., WorkflowDefinition]:
    def make(
        team: Team, name: str = "deploy", path: str = "/hooks/deploy", **kw: object
    ) -> WorkflowDefinition:
        return workflow_apply(team=team, content=hook_yaml(name, path, **kw)).workflow  # type: ignore[arg-type]

    return make
