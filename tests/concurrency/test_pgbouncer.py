"""The core admission races with every connection of this process going through PgBouncer in
transaction pooling mode (16 clients on 4 server connections): admission's locks are
transaction-scoped (`pg_advisory_xact_lock`), so a server connection handed to another client
between two transactions carries none of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.concurrency.test_admission_races import (
    LIMIT,
    assert_a_flood_keeps_the_workflow_limit,
    assert_promoted_in_fifo_order,
    drain,
    flood,
)
from tests.multihost.pgbouncer import PgBouncer

pytestmark = [pytest.mark.hosts, pytest.mark.django_db(transaction=True)]

ROUNDS = 6


@pytest.fixture
def through_pgbouncer(pgbouncer: PgBouncer) -> Iterator[None]:
    """Every new connection of the default database (every thread's) goes through PgBouncer,
    until PgBouncer stops (restored here, not by monkeypatch, which is undone later)."""
    with pgbouncer.carrying_this_process():
        yield


def test_the_workflow_limit_holds_through_pgbouncer(
    make_team, make_workflow, sampler, through_pgbouncer, pgbouncer
):
    team = make_team()
    workflow = make_workflow(team, limit=LIMIT)
    before = pgbouncer.transactions()
    watch = assert_a_flood_keeps_the_workflow_limit(team, workflow, sampler, admissions=80)
    assert pgbouncer.transactions() - before >= 80
    print(
        f"\nthrough PgBouncer: max holders {watch.max_per_workflow[workflow.id]} (limit {LIMIT})"
        f" in {watch.samples} samples"
    )


def test_the_team_limit_holds_across_workflows_through_pgbouncer(
    make_team, make_workflow, sampler, through_pgbouncer
):
    team = make_team(max_concurrent_executions=4)
    workflows = [make_workflow(team, name) for name in ("a", "b", "c")]
    watch = sampler(team.id)
    outcomes = flood(team, workflows, admissions=60, threads=16)
    drain(workflows)
    watch.stop()
    assert len(outcomes) == 60
    assert 0 < watch.max_team <= 4
    for workflow in workflows:
        assert_promoted_in_fifo_order(workflow)


def test_without_locks_the_flood_through_pgbouncer_breaks_the_limit(
    make_team, make_workflow, sampler, without_locks, through_pgbouncer
):
    """Proof that the race above is caught through PgBouncer too."""
    team = make_team()
    workflow = make_workflow(team, limit=LIMIT)
    watch = sampler(team.id)
    # A newcomer queues behind the queue, so admissions race for a slot only while nothing is
    # queued, and through 4 server connections few of them overlap: rounds from an empty queue.
    for _ in range(ROUNDS):
        flood(team, [workflow], admissions=40, threads=16)
        drain([workflow])
    watch.stop()
    assert watch.max_per_workflow[workflow.id] > LIMIT
