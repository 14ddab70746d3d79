"""Named limits under concurrency (docs/limits.md): admissions of two workflows sharing a named
limit race each other and completions, a sampler checking the limit's holders at every
observation; the same flood without locks, which the sampler catches; and every kind of limit at
once (team, named, workflow, key), each held in every sample."""

from __future__ import annotations

import pytest

from executions.models import Execution
from executions.services.admission import execution_admit
from teams.models import NamedLimit
from teams.services import named_limit_set
from tests.concurrency.harness import CountSampler, run_in_threads
from tests.concurrency.test_admission_races import (
    assert_promoted_in_fifo_order,
    drain,
    flood,
    with_completions,
)

pytestmark = pytest.mark.django_db(transaction=True)

SHARED, ADMISSIONS = 3, 100


class LimitSampler(CountSampler):
    """In one snapshot: the holders of one named limit (LimitSampler(limit_id, team_id)) and,
    per group, of the team, of each workflow and of each key of a keyed workflow."""

    SQL = """
    SELECT 'limit', count(*) FROM executions_execution
     WHERE named_limits @> ARRAY[%s]::bigint[] AND status IN ('pending', 'running')
    UNION ALL
    SELECT g, count(*) FROM executions_execution e,
           LATERAL (VALUES ('team'), ('workflow ' || e.workflow_id),
                           ('key ' || e.workflow_id || ' ' || nullif(e.concurrency_key, '')))
                   AS groups(g)
     WHERE e.team_id = %s AND e.status IN ('pending', 'running') AND g IS NOT NULL
     GROUP BY g
    """

    def worst(self, prefix: str) -> int:
        return max(
            (n for group, n in self.most_per_group.items() if str(group).startswith(prefix)),
            default=0,
        )


def shared_limit(team, make_workflow, *, extra: str = "", limit: int = 0):
    named_limit_set(team=team, name="prod-db", max=SHARED)
    workflows = [
        make_workflow(team, name, limit=limit, extra=f"limits: [prod-db]\n{extra}")
        for name in ("a", "b")
    ]
    watch = LimitSampler(NamedLimit.objects.get().id, team.id)
    watch.start()
    return workflows, watch


def test_a_shared_limit_holds_under_a_flood_of_two_workflows(make_team, make_workflow):
    team = make_team()
    workflows, watch = shared_limit(team, make_workflow)
    outcomes = flood(team, workflows, admissions=ADMISSIONS)
    drain(workflows)
    watch.stop()
    assert set(outcomes) <= {"pending", "queued"}
    assert Execution.objects.filter(status="completed").count() == ADMISSIONS
    assert watch.samples > 20
    assert 0 < watch.most_per_group["limit"] <= SHARED
    for workflow in workflows:
        assert_promoted_in_fifo_order(workflow)
    print(
        f"\nnamed limit {SHARED} over two workflows: max holders {watch.most_per_group['limit']}"
        f" in {watch.samples} samples"
    )


def test_without_locks_the_same_flood_breaks_the_shared_limit(
    make_team, make_workflow, without_locks
):
    """Proof that the test catches the bug: without locks the named limit is exceeded."""
    team = make_team()
    workflows, watch = shared_limit(team, make_workflow)
    flood(team, workflows, admissions=ADMISSIONS)
    watch.stop()
    print(f"\nwithout locks: max holders {watch.most_per_group['limit']} (limit {SHARED})")
    assert watch.most_per_group["limit"] > SHARED


def test_every_limit_holds_together(make_team, make_workflow):
    """Team 4, named limit 3 (a and b), workflows 2 each, keys 1 (a's and b's), and c outside
    the named limit competing for the team: every limit held in every sample."""
    team = make_team(max_concurrent_executions=4)
    keyed = 'inputs:\n  customer: {type: string}\nconcurrency_key: "{{ inputs.customer }}"\n'
    workflows, watch = shared_limit(
        team, make_workflow, extra=keyed + "max_parallel_per_key: 1\n", limit=2
    )
    other = make_workflow(team, "c", limit=2)
    targets = [(workflows[n % 2], {"customer": f"k{n % 3}"}) for n in range(80)]
    targets += [(other, {})] * 20
    jobs = [
        (lambda w=w, i=i: execution_admit(team=team, workflow=w, inputs=i).status)
        for w, i in targets
    ]
    everything = [*workflows, other]
    outcomes = with_completions([everything[0]], lambda: run_in_threads(jobs, threads=16))
    drain(everything)
    watch.stop()
    assert set(outcomes) <= {"pending", "queued"}
    assert Execution.objects.filter(status="completed").count() == 100
    seen = {
        "team": watch.most_per_group["team"],
        "limit": watch.most_per_group["limit"],
        "workflow": watch.worst("workflow "),
        "key": watch.worst("key "),
    }
    print(f"\nall limits together: max holders {seen} in {watch.samples} samples")
    assert watch.samples > 20
    assert 0 < seen["team"] <= 4
    assert 0 < seen["limit"] <= SHARED
    assert 0 < seen["workflow"] <= 2
    assert 0 < seen["key"] <= 1
