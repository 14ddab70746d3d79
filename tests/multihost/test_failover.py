"""The database fails over under a webhook flood and nothing admitted is lost: two app hosts
(`mantle serve`, web and workers, started once for the module and never restarted) reach a
Patroni cluster (primary + synchronous standby + Raft witness): app1 through a libpq multi-host
URL, app2 through a PgBouncer of its own in front of an HAProxy that follows Patroni's leader
(tests/multihost/haproxy.py), its LISTEN sessions and clock lock on the multi-host URL.
Signed webhooks with Idempotency-Keys come from clients that retry 503s; the primary's host is
killed (SIGKILL of Patroni and PostgreSQL), switched over (patronictl), brought back as a standby,
and partitioned away. Every key answered 202 (or 200 for a retried key) has exactly one execution
on the new primary, every execution completes, and the team, workflow and key limits hold in
every sample taken on whichever server is primary.

Each step calls a witness in the test process (tests/multihost/witness.py) that records when
every attempt of it ran: no two attempts of one step overlap in time (fencing)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import pytest

from api.hooks import webhook_idempotency_key
from tests.api.conftest import hook_yaml, sign
from tests.factories import workflow_yaml
from tests.multihost import haproxy, patroni, pgbouncer
from tests.multihost import network as netns
from tests.multihost.haproxy import PooledPrimary
from tests.multihost.hosts import AppHost
from tests.multihost.network import Network
from tests.multihost.patroni import TTL, PatroniCluster
from tests.multihost.sampler import Sampler
from tests.multihost.witness import StepWitness

pytestmark = [pytest.mark.hosts, pytest.mark.slow]

TEAM = "failover"
SECRET = "failover-hook-secret"
WEBHOOKS = 400  # per disruption; the disruption comes once a third of them are answered
CLIENTS = 8
PACE = 0.05  # seconds a client waits between two webhooks
# Each limit is reached (the sampler's maxima are asserted above 0 and printed): the workflow's
# 6 below its 3 keys' 9, the team's 10 below the open workflow's backlog. The flood and its
# drain take most of each test's time: these limits run it at 10 at once.
TEAM_LIMIT, WORKFLOW_LIMIT, KEY_LIMIT = 10, 6, 3
KEYED = (
    'concurrency_key: "{{ trigger.payload.customer }}"\n'
    f"max_parallel_per_key: {KEY_LIMIT}\n"
    f"triggers:\n  - type: webhook\n    path: /hooks/fo-limited\n    secret: {SECRET}\n"
)
# A step whose worker could not renew its lease while no primary answered is run again
# (docs/operations.md, Database failover): the reaper fails an attempt whose lease expired.
# Its work is a call to the witness, held HOLD seconds, naming its execution and step.
STEP = """\
  - name: work
    action: http/request
    params:
      method: POST
      url: {url}
      body: {{execution: "{{{{ execution.id }}}}", step: work}}
    retry: {{max_attempts: 3}}
"""
HOLD = 0.1
# Shorter than the kill's outage (Patroni's ttl), so the steps running at the kill are run again;
# longer than a worker takes to renew on the new primary once it is up (a dead link found in 3 s,
# a dead host's connect_timeout of 2 s passed): with 3 s a step's second lease could expire too,
# and the reaper quarantines an execution that lost two leases (engine/reaper.py).
STEP_LEASE = 10.0
GIVE_UP = 120.0  # seconds a client retries one key
EXECUTIONS_SQL = """
SELECT e.idempotency_key, e.status FROM executions_execution e
  JOIN teams_team t ON t.id = e.team_id
 WHERE t.slug = %s AND e.idempotency_key = ANY(%s)
"""
STEPS_SQL = """
SELECT s.execution_id, s.name, s.status, s.attempt, s.error FROM executions_stepexecution s
  JOIN executions_execution e ON e.id = s.execution_id
 WHERE e.idempotency_key = ANY(%s)
"""


@dataclass
class Attempt:
    started: float  # time.monotonic()
    ended: float
    status: int  # 0: no answer
    error: str


@dataclass
class Delivery:
    path: str
    key: str
    app: int  # the index of the app host it is sent to
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def status(self) -> int:
        return self.attempts[-1].status


@dataclass
class Failover:
    network: Network
    cluster: PatroniCluster
    apps: list[AppHost]  # app1 straight to the primary, app2 through PgBouncer
    witness: StepWitness


@pytest.fixture(scope="module")
def failover() -> Iterator[Failover]:
    why = netns.missing() or patroni.missing() or pgbouncer.missing() or haproxy.missing()
    if why:
        pytest.skip(why)
    network = Network()
    cluster: PatroniCluster | None = None
    pooled: PooledPrimary | None = None
    apps: list[AppHost] = []
    witness = StepWitness(f"{network.front_net}.1", HOLD).__enter__()
    try:
        app_hosts = [network.add_host(f"app{n}", 10 + n, front=True) for n in (1, 2)]
        cluster = PatroniCluster(network)
        cluster.manage(
            "from django.core.management import call_command\ncall_command('migrate', verbosity=0)"
        )
        cluster.manage(
            "from teams.services import team_create\n"
            "from workflows.services import workflow_apply\n"
            f"team = team_create(slug={TEAM!r}, max_concurrent_executions={TEAM_LIMIT})\n"
            f"for content in {documents(witness.url)!r}:\n"
            "    workflow_apply(team=team, content=content)\n"
        )
        # The steps may call the witness on the test process's front address.
        engine = {"step_lease": STEP_LEASE, "http": f"{{allow: [{network.front_net}.1]}}"}
        pooled = PooledPrimary(app_hosts[1], cluster)
        apps = [
            AppHost(host, database, role=None, web_workers=3, engine=engine)
            for host, database in zip(app_hosts, (cluster, pooled), strict=True)
        ]
        deadline = time.monotonic() + 90
        for app in apps:
            app.wait_ready(deadline)
        yield Failover(network, cluster, apps, witness)
    finally:
        for app in apps:
            app.close()
        if pooled is not None:
            pooled.close()
        if cluster is not None:
            cluster.close()
        network.close()
        witness.__exit__()


def documents(witness: str) -> list[str]:
    step = STEP.format(url=witness)
    return [
        workflow_yaml("fo-limited", limit=WORKFLOW_LIMIT, steps=step, extra=KEYED),
        hook_yaml("fo-open", "/hooks/fo-open", secret=SECRET, steps=step),
    ]


def deliver(client: httpx.Client, url: str, delivery: Delivery) -> None:
    """POST one signed webhook, again with the same Idempotency-Key while it answers 503 (or
    nothing), as a webhook sender does."""
    customer = int(delivery.key.rsplit("-", 1)[1]) % 3
    body = json.dumps({"customer": f"customer-{customer}"}).encode()
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": delivery.key,
        "X-Hub-Signature-256": sign(body, SECRET),
    }
    give_up = time.monotonic() + GIVE_UP
    while True:
        started = time.monotonic()
        try:
            answer = client.post(url + delivery.path, content=body, headers=headers)
            status = answer.status_code
            error = answer.json().get("error", "") if status >= 400 else ""
        except httpx.HTTPError as exc:
            status, error = 0, repr(exc)
        delivery.attempts.append(Attempt(started, time.monotonic(), status, error))
        if status not in (0, 503) or time.monotonic() > give_up:
            return
        time.sleep(0.2)


@dataclass
class Flood:
    deliveries: list[Delivery] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    disrupted_at: float = 0.0  # time.monotonic()
    ended: float = 0.0  # the last answer

    def answers(self) -> list[Attempt]:
        return [a for d in self.deliveries for a in d.attempts]

    def first_admitted_after(self, moment: float, app: int | None = None) -> float:
        """Seconds from `moment` to the first 202 of a request sent after it (to that app)."""
        ends = [
            a.ended
            for d in self.deliveries
            if app in (None, d.app)
            for a in d.attempts
            if a.status == 202 and a.started > moment
        ]
        return round(min(ends) - moment, 2)

    def outage(self, app: int) -> float:
        """As that app's clients saw it: seconds from the start of its first request answered
        503 (or nothing) to the first 202 of a request it was sent after that answer."""
        attempts = [a for d in self.deliveries if d.app == app for a in d.attempts]
        failed = [a for a in attempts if a.status in (0, 503)]
        if not failed:
            return 0.0
        first = min(failed, key=lambda a: a.started)
        ends = [a.ended for a in attempts if a.status == 202 and a.started > first.ended]
        return round(min(ends) - first.started, 2)

    def unavailable(self) -> list[Attempt]:
        return [a for a in self.answers() if a.status == 503]


def flood(
    failover: Failover, name: str, disrupt: Callable[[], None], count: int = WEBHOOKS
) -> Flood:
    """`count` webhooks over both web hosts; `disrupt` runs once a third of them are answered,
    while the clients go on with the rest (each retrying its key's 503s)."""
    result = Flood()
    lock = threading.Lock()
    answered = threading.Semaphore(0)

    def next_delivery() -> Delivery | None:
        with lock:
            n = len(result.deliveries)
            if n >= count:
                return None
            path = f"/hooks/fo-{('limited', 'open')[n % 4 // 2]}"
            delivery = Delivery(path, f"{name}-{n}", app=n % 2)
            result.deliveries.append(delivery)
            return delivery

    def client() -> None:
        with httpx.Client(timeout=15) as http:
            while delivery := next_delivery():
                deliver(http, failover.apps[delivery.app].url, delivery)
                answered.release()
                time.sleep(PACE)

    with ThreadPoolExecutor(CLIENTS) as pool:
        running = [pool.submit(client) for _ in range(CLIENTS)]
        for _ in range(count // 3):
            answered.acquire(timeout=60)
        result.disrupted_at = time.monotonic()
        disrupt()
        for future in running:
            future.result()
    result.ended = time.monotonic()
    return result


def check(failover: Failover, result: Flood, sampler: Sampler, label: str) -> dict[str, object]:
    """Every admitted key has exactly one execution on the primary, every one completes, the
    limits held in every sample; the figures, printed and returned."""
    cluster = failover.cluster
    keys = {webhook_idempotency_key(d.path, d.key): d for d in result.deliveries}
    deadline = time.monotonic() + 120
    while True:
        rows = cluster.query(EXECUTIONS_SQL, [TEAM, list(keys)])
        statuses = Counter(status for _, status in rows)
        if statuses.get("completed") == len(rows) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    drained = time.monotonic()
    executions = Counter(key for key, _ in rows)
    lost = [d.key for key, d in keys.items() if d.status in (200, 202) and executions[key] == 0]
    duplicated = [keys[key].key for key, n in executions.items() if n > 1]
    unreported = [keys[key].key for key in executions if keys[key].status not in (200, 202)]
    steps = cluster.query(STEPS_SQL, [list(keys)])
    ours = {str(execution) for execution, *_ in steps}
    runs = {of: n for of, n in failover.witness.runs().items() if of[0] in ours}
    overlaps = [pair for pair in failover.witness.overlapping() if pair[0].execution in ours]
    answers = result.answers()
    per_key = {key: n for (name, key), n in sampler.max_per_key.items() if name == "fo-limited"}
    violations = sum(
        [
            sampler.max_team > TEAM_LIMIT,
            sampler.max_per_workflow.get("fo-limited", 0) > WORKFLOW_LIMIT,
            any(n > KEY_LIMIT for n in per_key.values()),
        ]
    )
    unavailable = result.unavailable()
    figures = {
        "first_202_after": result.first_admitted_after(result.disrupted_at),
        "first_202_direct": result.first_admitted_after(result.disrupted_at, app=0),
        "first_202_pgbouncer": result.first_admitted_after(result.disrupted_at, app=1),
        "outage_direct": result.outage(0),
        "outage_pgbouncer": result.outage(1),
        "503_window": round(
            max((a.ended for a in unavailable), default=0.0)
            - min((a.started for a in unavailable), default=0.0),
            2,
        ),
        "answers": dict(Counter(a.status for a in answers)),
        "final": dict(Counter(d.status for d in result.deliveries)),
        "503s": len(result.unavailable()),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "limit_violations": violations,
        "steps_rerun": sum(attempt - 1 for *_, attempt, _ in steps),
        "calls_rerun": sum(n - 1 for n in runs.values()),
        "overlapping_attempts": len(overlaps),
        "samples": sampler.samples,
        "flood_s": round(result.ended - result.started, 1),
        "drain_s": round(drained - result.ended, 1),
        "max_holders": (
            sampler.max_team,
            sampler.max_per_workflow.get("fo-limited", 0),
            max(per_key.values(), default=0),
        ),
    }
    print(f"\n[hosts] failover {label}: {figures}")
    assert set(Counter(a.status for a in answers)) <= {200, 202, 503}, [
        a for a in answers if a.status not in (200, 202, 503)
    ]
    assert {a.error for a in result.unavailable()} <= {"database_unavailable", "busy"}
    assert {d.status for d in result.deliveries} <= {200, 202}, "a client gave up"
    assert lost == [] and duplicated == [] and unreported == []
    unfinished = [step for step in steps if step[2] != "completed"]
    assert statuses == {"completed": len(keys)}, (statuses, unfinished)
    assert unfinished == []
    assert Counter((execution, name) for execution, name, *_ in steps).most_common(1)[0][1] == 1
    # Fencing: every step's work was done at least once, and never by two attempts at once.
    assert len(runs) == len(steps)
    assert overlaps == [], overlaps
    assert sampler.samples > 50
    assert 0 < sampler.max_team <= TEAM_LIMIT
    assert 0 < sampler.max_per_workflow["fo-limited"] <= WORKFLOW_LIMIT
    assert set(per_key) == {"customer-0", "customer-1", "customer-2"}
    assert all(n <= KEY_LIMIT for n in per_key.values())
    return figures


def ready(app: AppHost) -> int:
    try:
        return httpx.get(f"{app.url}/readyz", timeout=5).status_code
    except httpx.HTTPError:
        return 0


def test_the_primary_killed_mid_flood_loses_nothing(failover: Failover) -> None:
    cluster = failover.cluster
    cluster.wait_healthy()
    old = cluster.leader_node().name
    readiness: list[tuple[float, int]] = []

    def kill() -> None:
        cluster.kill(old)
        readiness.append((time.monotonic(), ready(failover.apps[0])))

    with Sampler(cluster.client_url, TEAM) as sampler:
        result = flood(failover, "kill", kill)
        new = cluster.wait_leader(other_than=old)
        figures = check(failover, result, sampler, f"kill of {old} -> {new}")
    assert figures["503s"], "the kill went unnoticed: no 503 answered"
    assert figures["first_202_after"] < 3 * TTL
    assert readiness[0][1] == 503, "/readyz did not report the outage"
    assert all(ready(app) == 200 for app in failover.apps), "/readyz did not report the recovery"


def test_the_old_primary_returns_as_a_standby_and_the_cluster_serves_on(
    failover: Failover,
) -> None:
    cluster = failover.cluster
    if all(node.running() for node in cluster.databases):  # run alone: make an old primary
        cluster.kill(old := cluster.leader_node().name)
        cluster.wait_leader(other_than=old)
    (old_node,) = [node for node in cluster.databases if not node.running()]
    leader = cluster.wait_leader()
    cluster.restart(old_node.name)
    cluster.wait_healthy()
    members = {m["name"]: m for m in cluster.members()}
    assert cluster.leader() == leader
    assert members[old_node.name]["role"] == "sync_standby"
    assert members[old_node.name]["timeline"] == members[leader]["timeline"]
    rewound = "pg_rewind" in old_node.log.read_text()

    with Sampler(cluster.client_url, TEAM) as sampler:
        result = flood(failover, "rejoined", lambda: None, count=30)
        figures = check(failover, result, sampler, f"{old_node.name} back as standby")
    assert set(figures["answers"]) == {202}  # type: ignore[arg-type]
    # The returned standby holds what the new primary admitted (synchronous replication).
    keys = [webhook_idempotency_key(d.path, d.key) for d in result.deliveries]
    deadline = time.monotonic() + 30
    while (standby := cluster.query_node(old_node.name, EXECUTIONS_SQL, [TEAM, keys])) and len(
        standby
    ) < len(keys):
        assert time.monotonic() < deadline, len(standby)
        time.sleep(0.5)
    assert len(standby) == len(keys)
    print(f"[hosts] failover: {old_node.name} rejoined, pg_rewind in its log: {rewound}")


def test_a_switchover_under_the_flood_loses_nothing(failover: Failover) -> None:
    cluster = failover.cluster
    cluster.heal()
    old = cluster.leader_node().name
    (candidate,) = [node.name for node in cluster.databases if node.name != old]

    def switchover() -> None:
        done = cluster.switchover(old, candidate)
        assert done.returncode == 0, done.stdout + done.stderr

    with Sampler(cluster.client_url, TEAM) as sampler:
        result = flood(failover, "switchover", switchover)
        assert cluster.wait_leader() == candidate
        check(failover, result, sampler, f"switchover {old} -> {candidate}")
    healthy = time.monotonic()
    cluster.wait_healthy()  # the old primary follows the new one as its sync standby
    print(f"[hosts] failover: sync standby again {time.monotonic() - healthy:.1f}s after the check")


def test_a_partitioned_primary_is_demoted_and_nothing_is_lost(failover: Failover) -> None:
    cluster = failover.cluster
    cluster.heal()
    old = cluster.leader_node()
    bridge = failover.network.bridges[0]
    demoted_after: list[float] = []

    def partition() -> None:
        cut = time.monotonic()
        old.host.cut_back_link(bridge)
        try:
            cluster.wait_leader(other_than=old.name)
            while cluster.writable_inside(old.name):
                assert time.monotonic() < cut + 3 * TTL, "the isolated primary still writable"
                time.sleep(0.5)
            demoted_after.append(time.monotonic() - cut)
            time.sleep(max(0.0, cut + TTL + 2 - time.monotonic()))  # longer than the DCS TTL
        finally:
            old.host.restore_back_link(bridge)

    with Sampler(cluster.client_url, TEAM) as sampler:
        result = flood(failover, "partition", partition)
        cluster.wait_leader(other_than=old.name)
        figures = check(failover, result, sampler, f"partition of {old.name}")
    cluster.wait_healthy()  # the old primary rejoins as a standby
    print(f"[hosts] failover: isolated primary read-only {demoted_after[0]:.1f}s after the cut")
    assert figures["503s"]
