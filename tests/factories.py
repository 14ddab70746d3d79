"""Test data, built the way the product builds it: teams, keys and workflows through their
services (a workflow always has its versions), executions and steps as rows in a given status.

    team = TeamFactory(max_concurrent_executions=2)
    key, token = ApiKeyFactory(team=team)          # token: the Bearer secret, shown once
    workflow = WorkflowFactory(team=team, limit=1, on_limit="reject")
    queued = ExecutionFactory(workflow=workflow, status=Status.QUEUED)
"""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth.models import User
from django.utils import timezone
from factory.django import DjangoModelFactory

from executions.models import TERMINAL, Execution, QueueSample, Status, StepExecution
from teams.models import ApiKey, Team
from teams.services import api_key_create, team_create
from workflows.models import WorkflowDefinition
from workflows.services import workflow_apply

NOOP_STEP = "  - name: only\n    action: test/noop\n"


# Webhook secrets spelled three ways: quoted, as a block, plain.
SIGNED_WORKFLOW = """name: signed
triggers:
  - type: webhook
    path: /hooks/signed
    secret: 'a quoted: secret'
  - type: webhook
    path: /hooks/block
    secret: |
      a-block-secret
  - type: webhook
    path: /hooks/plain
    secret: a-plain-secret
steps:
  - name: only
    action: test/noop
"""


# A workflow's extra YAML keying its executions by the input `customer`.
KEYED = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'


def workflow_yaml(
    name: str = "deploy",
    *,
    limit: int = 0,
    on_limit: str = "queue",
    steps: str = NOOP_STEP,
    extra: str = "",
) -> str:
    return (
        f"name: {name}\nmax_parallel_executions: {limit}\non_limit: {on_limit}\n{extra}"
        f"steps:\n{steps}"
    )


class TeamFactory(DjangoModelFactory[Team]):
    class Meta:
        model = Team

    slug = factory.Sequence(lambda n: f"team-{n + 1}")
    name = ""
    max_concurrent_executions: int | None = None

    @classmethod
    def _create(cls, model_class: type[Team], *args: Any, **kwargs: Any) -> Team:
        return team_create(**kwargs)


class ApiKeyFactory(factory.Factory):
    """Creates (ApiKey, token): the token is the `Bearer` secret, which is never stored."""

    class Meta:
        model = ApiKey

    team = factory.SubFactory(TeamFactory)
    name = ""

    @classmethod
    def _create(cls, model_class: type[ApiKey], *args: Any, **kwargs: Any) -> tuple[ApiKey, str]:
        return api_key_create(**kwargs)


class WorkflowFactory(DjangoModelFactory[WorkflowDefinition]):
    """A workflow applied from YAML (workflow_yaml's keywords), with its first version."""

    class Meta:
        model = WorkflowDefinition

    team = factory.SubFactory(TeamFactory)
    name = "deploy"
    limit = 0
    on_limit = "queue"
    steps = NOOP_STEP
    extra = ""

    @classmethod
    def _create(
        cls, model_class: type[WorkflowDefinition], *args: Any, team: Team, **kwargs: Any
    ) -> WorkflowDefinition:
        return workflow_apply(team=team, content=workflow_yaml(**kwargs)).workflow


class ExecutionFactory(DjangoModelFactory[Execution]):
    """An execution of the workflow's current version in `status`, its times set as the engine
    sets them. It is a row, not an admission: no limit is checked and no worker starts it."""

    class Meta:
        model = Execution

    workflow = factory.SubFactory(WorkflowFactory)
    team = factory.SelfAttribute("workflow.team")
    version = factory.LazyAttribute(lambda e: e.workflow.applied_version)
    status = Status.PENDING
    # The clock of this process, not the database's Now(), which is one time per transaction:
    # executions made in one test keep their order.
    created_at = factory.LazyFunction(timezone.now)
    blocked_by = factory.LazyAttribute(lambda e: "workflow" if e.status == Status.QUEUED else None)
    queued_at = factory.LazyAttribute(
        lambda e: timezone.now() if e.status == Status.QUEUED else None
    )
    started_at = factory.LazyAttribute(
        lambda e: timezone.now() if e.status == Status.RUNNING or e.status in TERMINAL else None
    )
    completed_at = factory.LazyAttribute(lambda e: timezone.now() if e.status in TERMINAL else None)


class StepExecutionFactory(DjangoModelFactory[StepExecution]):
    class Meta:
        model = StepExecution

    execution = factory.SubFactory(ExecutionFactory)
    name = "only"
    status = "pending"


def fanout_branches(execution: Execution, count: int, **fields: Any) -> list[StepExecution]:
    """`count` branches of one fan-out step of `execution` (StepExecution's fields), inserted
    in batches of 2,000 rows."""
    branches = (
        StepExecution(execution=execution, fanout_index=index, **fields) for index in range(count)
    )
    return StepExecution.objects.bulk_create(branches, batch_size=2000)


class QueueSampleFactory(DjangoModelFactory[QueueSample]):
    class Meta:
        model = QueueSample

    workflow = factory.SubFactory(WorkflowFactory)
    queued = 0
    running = 0


class UserFactory(DjangoModelFactory[User]):
    """A dashboard user; `teams` are the teams they are a member of."""

    class Meta:
        model = User
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user-{n + 1}")
    password = factory.django.Password("s3cret-pass")
    is_staff = False
    is_superuser = False

    @factory.post_generation
    def teams(self, create: bool, teams: tuple[Team, ...] | None, **kwargs: Any) -> None:
        if create and teams:
            self.teams.set(teams)
