"""400 webhooks over two web hosts while both run workers (Redis broker, PgBouncer): the team's
limit 8, a workflow's limit 5 and its per-key limit 2 hold at every observation of a sampler on
the database host, all 400 are accounted for, and the queued ones are promoted FIFO per key."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from tests.api.conftest import hook_yaml
from tests.factories import workflow_yaml
from tests.multihost.conftest import Hosts
from tests.multihost.sampler import Sampler

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

WEBHOOKS = 400
TEAM_LIMIT, WORKFLOW_LIMIT, KEY_LIMIT = 8, 5, 2
KEYED = (
    'concurrency_key: "{{ trigger.payload.customer }}"\n'
    f"max_parallel_per_key: {KEY_LIMIT}\n"
    "triggers:\n  - type: webhook\n    path: /hooks/limited\n    auth: none\n"
)
STEP = "  - name: work\n    action: test/sleep\n    params: {seconds: 0.05}\n"
# Per queue (workflow, key): executions promoted out of it, in creation order.
PROMOTED_SQL = """
SELECT w.name, e.concurrency_key, e.promoted_at FROM executions_execution e
  JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
  JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = %s AND e.queued_at IS NOT NULL
 ORDER BY e.created_at, e.id
"""
STATUS_SQL = """
SELECT e.status, count(*) FROM executions_execution e JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = %s GROUP BY 1
"""


def deliver(client: httpx.Client, url: str, key: str) -> int:
    """POST one webhook, retrying its Idempotency-Key on 503 (bounded); the last status."""
    status = 0
    payload = {"customer": f"customer-{int(key.rsplit('-', 1)[1]) % 3}"}
    for _ in range(20):
        try:
            status = client.post(url, json=payload, headers={"Idempotency-Key": key}).status_code
        except httpx.HTTPError:
            status = 0
        if status not in (0, 503):
            break
        time.sleep(0.1)
    return status


def wait_all_completed(url: str, team: str, total: int, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            statuses = dict(conn.execute(STATUS_SQL, [team]).fetchall())
            if statuses.get("completed") == total or time.monotonic() > deadline:
                return statuses
            time.sleep(0.25)


def test_a_flood_over_two_web_hosts_holds_every_limit(hosts: Hosts, start_apps) -> None:
    database = hosts.database
    database.team(
        "flood",
        limit=TEAM_LIMIT,
        workflows=[
            workflow_yaml("limited", limit=WORKFLOW_LIMIT, steps=STEP, extra=KEYED),
            hook_yaml("open", "/hooks/open", steps=STEP),
        ],
    )
    # 16 web workers admit at once: with 4, a lockless admission (mantle_admit without its
    # locks) broke no limit in a run; with 16 it broke the key limit (3 holders of one key).
    apps = start_apps([None, None], web_workers=8)
    targets = [
        (f"{apps[n % 2].url}/hooks/{('limited', 'open')[n % 4 // 2]}", f"hook-{n}")
        for n in range(WEBHOOKS)
    ]
    started = time.monotonic()
    with Sampler(database.direct_url, "flood") as sampler:
        with ThreadPoolExecutor(16) as pool, httpx.Client(timeout=10) as client:
            statuses = list(pool.map(lambda target: deliver(client, *target), targets))
        admitted = time.monotonic() - started
        final = wait_all_completed(database.direct_url, "flood", WEBHOOKS, timeout=120)
    drained = time.monotonic() - started
    with psycopg.connect(database.direct_url) as conn:
        promoted = conn.execute(PROMOTED_SQL, ["flood"]).fetchall()
    print(
        f"\n[hosts] flood: {dict(Counter(statuses))} in {admitted:.1f}s, all done in "
        f"{drained:.1f}s; max holders team {sampler.max_team}/{TEAM_LIMIT}, per workflow "
        f"{sampler.max_per_workflow}, per key of limited "
        f"{max(n for (name, _), n in sampler.max_per_key.items() if name == 'limited')} in "
        f"{sampler.samples} samples; {len(promoted)} queued"
    )
    assert statuses == [202] * WEBHOOKS
    assert final == {"completed": WEBHOOKS}
    assert sampler.samples > 100
    assert 0 < sampler.max_team <= TEAM_LIMIT
    assert 0 < sampler.max_per_workflow["limited"] <= WORKFLOW_LIMIT
    keys = {key for (name, key) in sampler.max_per_key if name == "limited"}
    assert keys == {"customer-0", "customer-1", "customer-2"}
    assert all(sampler.max_per_key["limited", key] <= KEY_LIMIT for key in keys)
    assert promoted, "nothing queued: the flood never reached a limit"
    for queue in {(name, key) for name, key, _ in promoted}:
        times = [at for *of, at in promoted if tuple(of) == queue]
        assert None not in times and times == sorted(times), f"{queue}: not promoted FIFO"
