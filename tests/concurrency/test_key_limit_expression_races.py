"""Per-key limits from an expression (docs/limits.md): keys evaluating 1 and 3, 120 admissions
racing each other and completions in threads on their own connections, a sampler checking every
key at every observation; and the same flood without locks, which the sampler catches."""

from __future__ import annotations

import pytest

from executions.models import Execution
from executions.services.admission import execution_admit
from teams.models import Team
from tests.concurrency.harness import KeySampler, run_in_threads, status_or_deadlock
from tests.concurrency.test_admission_races import drain, with_completions

pytestmark = pytest.mark.django_db(transaction=True)

ADMISSIONS = 120
LIMITS = {"pro": 3, "free": 1}  # what each key's expression evaluates
KEYED = (
    'inputs:\n  plan: {type: string}\nconcurrency_key: "{{ inputs.plan }}"\n'
    "max_parallel_per_key: \"{{ inputs.plan == 'pro' ? 3 : 1 }}\"\n"
)


def flood(team: Team, workflow) -> list[str]:
    def admit(n: int) -> str:
        inputs = {"plan": "pro" if n % 2 else "free"}
        return status_or_deadlock(
            lambda: execution_admit(team=team, workflow=workflow, inputs=inputs).execution.status
        )

    jobs = [(lambda n=n: admit(n)) for n in range(ADMISSIONS)]
    return with_completions([workflow], lambda: run_in_threads(jobs, threads=16))


def test_each_key_holds_the_limit_it_evaluated(make_team, make_workflow):
    team = make_team()
    workflow = make_workflow(team, limit=0, extra=KEYED)
    watch = KeySampler(workflow.id)
    watch.start()
    outcomes = flood(team, workflow)
    drain([workflow])
    watch.stop()
    assert set(outcomes) <= {"pending", "queued"}
    assert "queued" in outcomes
    stored = dict(
        Execution.objects.filter(workflow=workflow).values_list("concurrency_key", "key_limit")
    )
    assert stored == LIMITS
    assert Execution.objects.filter(workflow=workflow).count() == ADMISSIONS
    assert watch.samples > 20
    # Every sample within the key's own limit, and each limit reached.
    assert watch.most_per_group == LIMITS
    print(f"\nexpression key limits: most held {watch.most_per_group} in {watch.samples} samples")


def test_without_locks_the_same_flood_breaks_a_key_limit(make_team, make_workflow, without_locks):
    """Proof that the test catches the bug: without locks a key holds more than it evaluated."""
    team = make_team()
    workflow = make_workflow(team, limit=0, extra=KEYED)
    watch = KeySampler(workflow.id)
    watch.start()
    flood(team, workflow)
    watch.stop()
    print(f"\nwithout locks: most held {watch.most_per_group} (limits {LIMITS})")
    assert any(watch.most_per_group.get(key, 0) > most for key, most in LIMITS.items())
