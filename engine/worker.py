"""A step-worker process: up to `engine.slots_per_worker` step attempts at once.

One asyncio event loop runs the actions (a step waiting on I/O holds a slot, not a process);
database work goes through a small pool of threads, each with its own connection, never one
connection per step. The loop also reads the listener's connection (LISTEN on the work channel):
while the process holds its serve's claimer role (engine/claimer.py), a notification wakes the
claim loop. (The engine clock runs in a process of its own, so a worker that hangs never stops
the reaper that recovers its steps.)

The claim loop claims the due steps whose step-scope limits have room (first: a freed unit is
handed on without waiting for a batch of starts), starts pending executions (claimed and advanced
in one transaction, one batch at a time on a connection of its own, whether slots are free or
not; that transaction claims the first steps it creates, as many as there are free slots) and
then claims due steps, as many as it has free slots. The claimer then sleeps until a
notification, a freed slot, the earliest retry's `not_before`, or the safety poll; another
worker until the role or the backstop. A claimed step whose params read no expression starts
without another query. Finished attempts are settled in batches: one transaction ends every
attempt that finished meanwhile and advances their executions, by at most SETTLERS batches at
once; attempts of steps with step-scope limits apart, on a connection of their own, so that the
units they free are not held up behind a large batch. That connection hands the units on itself:
right after the commit that frees them, it claims the waiting steps they let in, for this worker
(whatever its claimer role: the limits' locks keep it exact), in a transaction of its own that
takes nothing before those locks. Attempts that all completed end in one statement and their
executions advance after that claim, on a settle thread: a hand-off waits for two round trips,
not for the advance's (docs/performance.md, Step-scope hand-off). The NOTIFY of that commit,
the claimer's claim and the safety poll remain for the units freed by other paths (cancel,
reaper, a hand-off claim that failed).
Slots are reserved by whichever claim is in flight, so two claims never fill the same slot.

Every HEARTBEAT one statement renews the leases of all the attempts the process holds and reads
their executions' status: a cancelled or timed-out execution stops its steps within a
heartbeat, and an attempt whose lease was taken over is abandoned without a write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from django.conf import settings
from django.db import DatabaseError, connection

from engine import claimer, dispatch, leases, orchestrator, runner
from engine.actions import ActionContext
from engine.listener import Listener
from executions.models import StepStatus

HEARTBEAT = 0.5  # seconds; also bounds how long a cancelled step keeps running
FENCE_POLL = 0.1  # seconds between looks at the leases while a renewal is unanswered
SAFETY_POLL = 5.0  # seconds between the claimer's claims when nothing wakes it
# Seconds between the starts of two claims of one process: the claimer claims at most this often
# however many notifications come (a busy claim takes all that is due meanwhile), and at once
# after a pause longer than this.
CLAIM_INTERVAL = 0.01
# Seconds between the claims of a worker that does not hold the claimer role (engine/claimer.py):
# how long a claimer that hangs (SIGSTOP) can delay the work it would have claimed.
BACKSTOP = 1.0
STOP_GRACE = 3.0  # seconds a stopping worker lets running attempts finish before handing back
EXECUTION_BATCH = 50
SETTLE_BATCH = 100
SETTLERS = 2  # settle batches in flight at once, each on a database thread

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return function(*args, **kwargs)
    except DatabaseError:
        connection.close()  # a broken connection is opened afresh by the next call
        raise


_Unsettled = tuple[runner.Settlement, asyncio.Future[bool]]


@dataclass
class _Settling:
    """Finished attempts waiting to be settled, by at most `most` batches at once on `pool`."""

    pool: ThreadPoolExecutor
    most: int
    hands_on: bool = False  # after each batch, claim the waiting steps the freed units let in
    waiting: list[_Unsettled] = field(default_factory=list)
    batches: int = 0


class StepWorker:
    def __init__(self, *, slots: int, claimer_lock: str | None = None) -> None:
        self.slots = slots
        self.owner = leases.new_owner()
        self.held: dict[int, leases.Held] = {}
        self.stopping = False
        # Settle batches, and the params of steps that read expressions.
        self.db = ThreadPoolExecutor(SETTLERS, thread_name_prefix="db")
        # Claims, starts and leases run on connections of their own, never queued behind the
        # steps' work: a backlog of one execution's steps delays neither another's start nor a
        # lease.
        self.claims = ThreadPoolExecutor(1, thread_name_prefix="claims")
        self.starts = ThreadPoolExecutor(1, thread_name_prefix="starts")
        self.leases = ThreadPoolExecutor(1, thread_name_prefix="leases")
        self.background: set[asyncio.Future[Any]] = set()
        self.wake = asyncio.Event()
        self.listener = Listener(self.wake)
        self.role = claimer.ClaimerRole(claimer_lock, on_acquired=self.wake.set)
        # The last claim took as many steps as there were free slots: more may be due, and a
        # freed slot wakes the claimer. (Otherwise it does not: nothing is left to claim.)
        self.short_of_slots = False
        self.settling = _Settling(self.db, SETTLERS)
        # A step holding step-scope limits frees its units only when its end commits
        # (docs/limits.md, Step scope): it is settled apart, never behind a batch of others.
        self.freeing = _Settling(ThreadPoolExecutor(1, thread_name_prefix="freeing"), 1, True)
        self.reserved = 0  # free slots a claim in flight may fill

    async def run(self) -> None:
        limits = httpx.Limits(max_connections=self.slots, max_keepalive_connections=self.slots)
        # Redirects are followed by http/request itself, each hop checked (engine/egress.py).
        async with httpx.AsyncClient(trust_env=False, limits=limits) as http:
            self.context = ActionContext(http=http)
            heartbeat = asyncio.create_task(self._heartbeat_loop())
            self._background(asyncio.create_task(self.listener.open()))
            self.role.request()
            await self._claim_loop()
            await self._drain()
            heartbeat.cancel()
        self.listener.close()
        for pool in (self.db, self.claims, self.starts, self.leases, self.freeing.pool):
            pool.shutdown()

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()

    def _db(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        return self._on(self.db, function, *args, **kwargs)

    def _on(
        self, pool: ThreadPoolExecutor, function: Callable[..., T], *args: Any, **kwargs: Any
    ) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(pool, lambda: _in_thread(function, *args, **kwargs))

    async def _claim_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopping:
            began = loop.time()
            self.wake.clear()  # before claiming: a notification during the claim is not lost
            if self.role.held:
                self.listener.arm()
            else:
                self.listener.drain()
            try:
                claimed = await self._claim()
                timeout = 0.0 if claimed else await self._idle_timeout()
            except Exception:  # a database error, or a bug: the worker claims on
                logger.exception("claim failed; retrying")
                timeout = 1.0
            # The claimer lets go when its slots are full; a worker with room waits for the role.
            if len(self.held) >= self.slots:
                self.role.release()
            else:
                self.role.request()
            if timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout)
            await asyncio.sleep(began + CLAIM_INTERVAL - loop.time())

    async def _claim(self) -> bool:
        """Claim due steps with step-scope limits, start pending executions, then claim due
        steps; True when any may find more at once. Limited steps come first: a unit freed is
        handed on at once, not after a batch of starts (docs/limits.md, Step scope). A start
        claims the first steps it creates, as many as there are free slots (so a new execution's
        first steps come before the next branches of a fan-out, as in a step claim); what it
        leaves waits for any worker. A full worker starts executions too, so a start never waits
        for a slot to free."""
        free = self._reserve(0)
        try:
            limited = await self._on(
                self.claims, runner.steps_claim, dispatch.steps_claim_limited, self.owner, free
            )
            free -= self._hold(limited, limited=True)
            started, first = await self._on(
                self.starts,
                orchestrator.executions_start,
                EXECUTION_BATCH,
                owner=self.owner,
                room=free,
            )
            free -= self._hold(first)
            wanted = free
            claims = await self._on(
                self.claims, runner.steps_claim, dispatch.steps_claim, self.owner, wanted
            )
            free -= self._hold(claims)
        finally:
            self.reserved -= free
        self.short_of_slots = len(claims) == wanted
        return started == EXECUTION_BATCH or (self.short_of_slots and wanted > 0)

    def _reserve(self, freed: int) -> int:
        """Reserve the free slots (and `freed` more, held by attempts being settled) for a
        claim: how many. The claim gives back what it does not fill."""
        free = 0 if self.stopping else self.slots - len(self.held) - self.reserved + freed
        self.reserved += max(free, 0)
        return max(free, 0)

    def _hold(self, claims: list[dispatch.Claim], *, limited: bool = False) -> int:
        """Run the claims, in slots their claim reserved: how many."""
        self.reserved -= len(claims)
        for claim in claims:
            held = self.held[claim.id] = leases.Held(claim, limited)
            self._background(asyncio.create_task(self._attempt(held)))
        return len(claims)

    async def _idle_timeout(self) -> float:
        if not self.role.held:
            return BACKSTOP
        due = await self._on(self.claims, dispatch.steps_next_due)
        return SAFETY_POLL if due is None else min(max(due, 0.001), SAFETY_POLL)

    def _background(self, future: asyncio.Future[Any]) -> None:
        self.background.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: asyncio.Future[Any]) -> None:
        self.background.discard(future)
        if not future.cancelled() and future.exception() is not None:
            logger.error("engine work failed", exc_info=future.exception())

    async def _attempt(self, held: leases.Held) -> None:
        claim = held.claim
        try:
            try:
                prepared = runner.prepare_kept(claim)
                if prepared is None:
                    prepared = await self._db(runner.prepare, claim)
            except DatabaseError:
                raise  # the lease runs out and the reaper retries the attempt
            except Exception as exc:
                # A bug in preparing one step fails that step, not the worker
                # (docs/hostile-input.md, No poison execution).
                logger.exception("step %s attempt %s: preparing failed", claim.id, claim.attempt)
                error = orchestrator.engine_error(exc)
                prepared = runner.Outcome(StepStatus.FAILED, error=error, retryable=False)
            if isinstance(prepared, runner.Outcome):
                outcome: runner.Outcome | None = prepared
            elif held.stopped:
                outcome = held.verdict
            else:
                held.action = asyncio.create_task(runner.perform(prepared, self.context))
                try:
                    outcome = await held.action
                except asyncio.CancelledError:
                    outcome = held.verdict
            if outcome is None:
                logger.warning("step %s attempt %s: given up by %s", claim.id, claim.attempt, self)
                return
            settling = self.freeing if held.limited else self.settling
            if not await self._settle(settling, runner.Settlement(claim, self.owner, outcome)):
                logger.warning(
                    "step %s attempt %s: no longer held by %s, result dropped",
                    claim.id,
                    claim.attempt,
                    self,
                )
        finally:
            del self.held[claim.id]
            if not self.role.held:
                self.role.request()
            elif self.short_of_slots:
                self.wake.set()

    async def _settle(self, settling: _Settling, settlement: runner.Settlement) -> bool:
        """Settle with whatever else finished meanwhile; whether the attempt was still ours."""
        settled = asyncio.get_running_loop().create_future()
        settling.waiting.append((settlement, settled))
        if settling.batches < settling.most:
            settling.batches += 1
            self._background(asyncio.create_task(self._settle_loop(settling)))
        return await settled

    async def _settle_loop(self, settling: _Settling) -> None:
        try:
            while settling.waiting:
                batch = settling.waiting[:SETTLE_BATCH]
                del settling.waiting[:SETTLE_BATCH]
                if settling.hands_on:
                    await self._settle_handing_on(settling.pool, batch)
                else:
                    await self._settle_batch(settling.pool, batch)
        finally:
            settling.batches -= 1

    async def _settle_handing_on(self, pool: ThreadPoolExecutor, batch: list[_Unsettled]) -> None:
        """Settle, then claim at once the waiting steps the freed units let in, into the slots
        of the batch's attempts (still held until settled) and any other free ones; then advance
        the executions of the attempts that completed, off this lane (on a settle thread): the
        next batch's units are not held up behind it."""
        room = self._reserve(len(batch))
        settlements = [settlement for settlement, _ in batch]
        try:
            settled, claims, unadvanced = await self._on(
                pool, runner.settle_then_claim, settlements, self.owner, room
            )
        except Exception:
            self.reserved -= room
            await self._settle_batch(pool, batch)  # the settle failed: as any batch
            return
        held = self._hold(claims, limited=True)
        self.reserved -= room - held
        if unadvanced:
            self._background(self._db(runner.advance, unadvanced))
        for settlement, future in batch:
            future.set_result(settlement.claim.id in settled)

    async def _settle_batch(self, pool: ThreadPoolExecutor, batch: list[_Unsettled]) -> None:
        try:
            settled = await self._on(pool, runner.settle, [settlement for settlement, _ in batch])
        except Exception as error:
            if len(batch) == 1:
                batch[0][1].set_exception(error)
                return
            # One execution's failure must not fail the others' settlements: one by one.
            for one in batch:
                await self._settle_batch(pool, [one])
            return
        for settlement, future in batch:
            future.set_result(settlement.claim.id in settled)

    def _halt(self, held: leases.Held, verdict: runner.Outcome | None) -> None:
        held.stopped, held.verdict = True, verdict
        if held.action is not None:
            held.action.cancel()

    async def _heartbeat_loop(self) -> None:
        # A renewal stuck on an unreachable database is waited for, never doubled, and the
        # leases' clock is read meanwhile (leases.fence).
        renewal: asyncio.Future[dict[int, str]] | None = None
        snapshot: dict[int, int] = {}
        asked = 0.0
        while True:
            if renewal is None:
                await asyncio.sleep(HEARTBEAT)
                if not self.held:
                    continue
                snapshot = {step_id: held.claim.attempt for step_id, held in self.held.items()}
                asked = time.monotonic()
                renewal = self._on(self.leases, dispatch.leases_renew, self.owner, snapshot)
            done, _ = await asyncio.wait({renewal}, timeout=FENCE_POLL)
            leases.fence(self.held.values(), self._halt, owner=str(self))
            if not done:
                continue
            try:
                statuses = renewal.result()
            except DatabaseError:
                logger.exception("heartbeat failed")  # the leases run on; the reaper has the rest
                continue
            finally:
                renewal = None
            leases.renewed(self.held, snapshot, statuses, asked, self._halt)

    async def _drain(self) -> None:
        """Let running attempts finish for STOP_GRACE, then hand the rest back."""
        if self.background:
            await asyncio.wait(list(self.background), timeout=STOP_GRACE)
        left = {step_id: held.claim.attempt for step_id, held in self.held.items()}
        for held in list(self.held.values()):
            self._halt(held, None)
        if left:
            released = await self._db(dispatch.leases_release, self.owner, left)
            logger.warning("%s stopped: handed back %s running steps", self, released)
        if self.background:
            await asyncio.wait(list(self.background), timeout=STOP_GRACE)

    def __str__(self) -> str:
        return f"worker {self.owner}"


async def _serve(worker: StepWorker) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, worker.stop)
    await worker.run()


def serve(claimer_lock: str | None = None) -> None:
    """Run a step worker until SIGTERM / SIGINT; `claimer_lock`: the file of its serve's claimer
    role (engine/claimer.py), else it claims on its own."""
    worker = StepWorker(slots=settings.MANTLE.engine.slots_per_worker, claimer_lock=claimer_lock)
    asyncio.run(_serve(worker))
