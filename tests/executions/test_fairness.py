"""Fair promotion (docs/limits.md): keys are served round-robin, the key promoted least recently
first, oldest first within a key, so one key's backlog never starves another key."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from executions.models import Execution, Status
from executions.services.lifecycle import execution_finish
from tests.factories import ExecutionFactory

pytestmark = pytest.mark.django_db

KEYED = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'


def queue_rows(workflow, key: str, count: int, start, **fields) -> None:
    """`count` queued executions of one key, a millisecond apart from `start` (rows, as
    admission writes them behind a full workflow)."""
    rows = [
        ExecutionFactory.build(
            workflow=workflow,
            status=Status.QUEUED,
            concurrency_key=key,
            inputs={"customer": key},
            created_at=start + timedelta(milliseconds=n),
            queued_at=start + timedelta(milliseconds=n),
            **fields,
        )
        for n in range(count)
    ]
    Execution.objects.bulk_create(rows, batch_size=2000)


def promote_one_at_a_time(workflow, rounds: int, capture) -> list[str]:  # type: ignore[no-untyped-def]
    """Finish the one slot holder `rounds` times; the key of each execution promoted into it."""
    keys = []
    for _ in range(rounds):
        holder = Execution.objects.get(workflow=workflow, status=Status.PENDING)
        # A savepoint of its own: the promotion after an earlier finish of this (never
        # committed) test transaction must not stand in for this one's (executions.signals).
        with capture(execute=True), transaction.atomic():
            execution_finish(holder.id, status=Status.COMPLETED)
        promoted = Execution.objects.get(workflow=workflow, status=Status.PENDING)
        keys.append(promoted.concurrency_key)
    return keys


def test_a_backlog_of_ten_thousand_does_not_delay_nine_single_keys(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1, extra=KEYED)
    start = timezone.now() - timedelta(hours=1)
    ExecutionFactory(workflow=workflow, status=Status.PENDING, concurrency_key="big")
    queue_rows(workflow, "big", 10_000, start)
    for n in range(9):
        queue_rows(workflow, f"single-{n}", 1, start + timedelta(minutes=10 + n))
    keys = promote_one_at_a_time(workflow, 10, django_capture_on_commit_callbacks)
    singles = [n for n, key in enumerate(keys, 1) if key.startswith("single-")]
    print(f"\nfairness: the nine single keys promoted at promotions {singles} of 10")
    assert sorted(keys[n - 1] for n in singles) == [f"single-{n}" for n in range(9)]
    assert max(singles) <= 10


def test_keys_take_turns_least_recently_promoted_first(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1, extra=KEYED)
    start = timezone.now() - timedelta(hours=1)
    ExecutionFactory(workflow=workflow, status=Status.PENDING, concurrency_key="a")
    for offset, key in enumerate(("a", "b", "c")):
        queue_rows(workflow, key, 3, start + timedelta(seconds=offset))
    keys = promote_one_at_a_time(workflow, 9, django_capture_on_commit_callbacks)
    # Never promoted keys first (oldest head first), then whoever waited longest since.
    assert keys == ["a", "b", "c"] * 3
    # Within a key, oldest first.
    for key in ("a", "b", "c"):
        order = Execution.objects.filter(workflow=workflow, concurrency_key=key).exclude(
            promoted_at=None
        )
        created = list(order.order_by("promoted_at").values_list("created_at", flat=True))
        assert created == sorted(created)


def test_a_key_promoted_recently_waits_for_the_others(
    team, make_workflow, django_capture_on_commit_callbacks
):
    workflow = make_workflow(team, limit=1, extra=KEYED)
    start = timezone.now() - timedelta(hours=1)
    ExecutionFactory(workflow=workflow, status=Status.PENDING, concurrency_key="x")
    # "a" was promoted a minute ago, "b" an hour ago: "b" goes first although "a" is older.
    ExecutionFactory(
        workflow=workflow,
        status=Status.COMPLETED,
        concurrency_key="a",
        promoted_at=timezone.now() - timedelta(minutes=1),
    )
    ExecutionFactory(
        workflow=workflow,
        status=Status.COMPLETED,
        concurrency_key="b",
        promoted_at=timezone.now() - timedelta(hours=1),
    )
    queue_rows(workflow, "a", 1, start)
    queue_rows(workflow, "b", 1, start + timedelta(seconds=1))
    assert promote_one_at_a_time(workflow, 2, django_capture_on_commit_callbacks) == ["b", "a"]
