"""Fixtures of the race harness (tests/concurrency/harness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from executions import locks
from tests.concurrency.harness import Sampler


@pytest.fixture
def sampler() -> Iterator[Callable[[int], Sampler]]:
    started: list[Sampler] = []

    def start(team_id: int) -> Sampler:
        sampler = Sampler(team_id)
        sampler.start()
        started.append(sampler)
        return sampler

    yield start
    for sampler in started:
        sampler.stop()


@pytest.fixture
def without_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bug the race tests must catch: admission and promotion without advisory locks."""
    monkeypatch.setattr(locks, "lock_team", lambda team_id: None)
    monkeypatch.setattr(locks, "lock_workflows", lambda workflow_ids: None)
    monkeypatch.setattr(locks, "lock_team_and_workflow", lambda team_id, workflow_id: None)
