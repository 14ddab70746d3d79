"""What a claim reads does not grow with the backlog (docs/performance.md, Claims): the pages a
claim touches, from PostgreSQL's own count (EXPLAIN ANALYZE's buffers), with a small and a
large backlog of one team, another team's work waiting beside it: at most twice as many pages
(each probe grows with its index's depth), where reading the backlog reads ten times more.
Pages, not seconds: the count does not depend on the machine's load (the claim's latency is a
bench figure)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction

from executions.models import Execution
from executions.sql import queries
from tests.factories import (
    ExecutionFactory,
    StepExecutionFactory,
    WorkflowFactory,
    fanout_branches,
)
from workflows.models import WorkflowDefinition

pytestmark = pytest.mark.django_db(transaction=True)

SMALL, LARGE = 2_000, 20_000
STEPS = {"owner": "me", "limit": 10, "lease": 60}
EXECUTIONS = {"limit": 10}


def pages(name: str, params: dict[str, Any]) -> int:
    """Shared pages the claim `name` reads (hit or read), its effect rolled back."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("ANALYZE executions_stepexecution, executions_execution")
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries[name], params)
        plan = cursor.fetchone()[0][0]["Plan"]
        transaction.set_rollback(True)
    # The update's inputs: what the claim reads to choose its rows and join them. (Writing the
    # rows it chose, with their indexes, costs the same per row whatever the backlog, but for
    # the depth of each index: not counted.)
    return sum(
        int(node["Shared Hit Blocks"]) + int(node["Shared Read Blocks"]) for node in plan["Plans"]
    )


def step_backlog(flood: WorkflowDefinition, branches: int) -> Execution:
    execution = ExecutionFactory(workflow=flood, status="running")
    fanout_branches(execution, branches, status="pending")
    return execution


def test_a_step_claim_at_20000_pending_steps_reads_about_what_it_reads_at_2000() -> None:
    flood, other = WorkflowFactory(name="flood"), WorkflowFactory(name="other")
    StepExecutionFactory(execution=ExecutionFactory(workflow=other, status="running"))
    step_backlog(flood, SMALL)
    small = pages("steps_claim", STEPS)
    step_backlog(flood, LARGE - SMALL)
    large = pages("steps_claim", STEPS)
    print(f"steps_claim pages: {small} at {SMALL:,} pending, {large} at {LARGE:,}")
    assert small < SMALL / 4, "the claim read the team's whole backlog"
    assert large <= small * 2


def test_an_execution_claim_at_5000_pending_reads_about_what_it_reads_at_500() -> None:
    flood, other = WorkflowFactory(name="flood"), WorkflowFactory(name="other")
    ExecutionFactory(workflow=other)
    ExecutionFactory.create_batch(500, workflow=flood)
    small = pages("executions_claim", EXECUTIONS)
    ExecutionFactory.create_batch(4_500, workflow=flood)
    large = pages("executions_claim", EXECUTIONS)
    print(f"executions_claim pages: {small} at 500 pending, {large} at 5,000")
    assert large <= small * 2


def test_a_claim_reading_each_teams_whole_backlog_reads_more_as_it_grows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mutant the cost test must catch: each team's rows read without the claim's bound
    (the old claim ranked every pending step: far worse)."""
    whole = queries["steps_claim"].replace(
        "LIMIT %(limit)s\n              FOR UPDATE", "FOR UPDATE"
    )
    assert whole != queries["steps_claim"]
    monkeypatch.setitem(queries, "steps_claim", whole)
    flood = WorkflowFactory(name="flood")
    step_backlog(flood, SMALL)
    small = pages("steps_claim", STEPS)
    step_backlog(flood, LARGE - SMALL)
    large = pages("steps_claim", STEPS)
    print(f"whole backlog: {small} pages at {SMALL:,} pending, {large} at {LARGE:,}")
    assert large > small * 2
