"""Fleet: this daemon's row in ``gochatd_daemons`` (the dashboard's fleet view), upserted
every ``BEAT_S`` with the database clock as its heartbeat, and deleted on a clean stop. A
daemon is ``alive`` while its heartbeat is at most ``ALIVE_S`` old (three beats; the
migrator's barrier uses the same window, migrate/route_control.LIVE_S); rows of daemons that
stopped without removing theirs are pruned by the retention loop after
``loops/retention.DAEMONS_KEEP_S``.

The row also carries an operator's request for this daemon (POST /v1/fleet/<id>/drain,
pause or resume): the pass that reads it asks the ``Lifecycle`` to move, as /v1/drain and
/v1/pause do, then clears it with a compare-and-set on the request's sequence number (a
newer request written meanwhile stays for the next pass) and writes the row again so the
fleet view shows the new state at once. On PostgreSQL a request, a daemon row inserted or
deleted, or a changed handler set is announced (NOTIFY, migration 0016): a pass runs at
once, so a request is applied within a round trip; elsewhere within ``BEAT_S``.

The row carries what this daemon runs and where (``runnable.DaemonHandlers``). A pass reads
the other rows back when the fleet changed (announced), every ``PEERS_S`` otherwise (a peer
that died shows as not alive only by age), and on every pass without announcements:
``lacking_peers`` is whether a live daemon of this daemon's queues lacks some of its types
(its stream entries for them are acked there, and this daemon then claims such jobs itself:
worker/capped_backlog.py), and ``without_handler`` tells the admin API and /metrics which
waiting jobs no live daemon can run.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import NoReturn

import trio

import gochatd
from gochatd.errors import StoreUnavailable
from gochatd.loops.every import wait_for_change
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.store import JobStore
from gochatd.store.fleet import DaemonBeat, DaemonRow
from gochatd.worker.lifecycle import Lifecycle
from gochatd.worker.pool import JobPool
from gochatd.worker.queues import QueueSelection
from gochatd.worker.runnable import DaemonHandlers, WaitingJobs, without_handler

#: A daemon whose heartbeat is older than this is shown as not alive.
ALIVE_S = 15.0
#: Between two heartbeats: three in each liveness window.
BEAT_S = ALIVE_S / 3
#: The other rows are read at least this often (and at once when the fleet changed).
PEERS_S = 60.0
#: Removing the row on a clean stop gets this long.
REMOVE_S = 2.0


@dataclass(frozen=True, slots=True)
class FleetResult:
    #: The operator's request applied in this pass, if any.
    applied: str | None


class FleetBeat:
    def __init__(self, *, store: JobStore, lifecycle: Lifecycle, pool: JobPool,
                 queues: QueueSelection, counters: Counters, worker_id: str) -> None:
        self._store = store
        self._queues = queues
        self._lacking_peers = False
        self._lifecycle = lifecycle
        self._pool = pool
        self._counters = counters
        self._worker_id = worker_id
        self._host = socket.gethostname()
        self._pid = os.getpid()
        #: One pass at a time (the loop's and the admin API's for this daemon).
        self._lock = trio.Lock()
        self._log = get_logger(worker_id=worker_id)

    def beat(self) -> DaemonBeat:
        lifecycle = self._lifecycle
        return DaemonBeat(id=self._worker_id, host=self._host, pid=self._pid,
                          mode=lifecycle.state.value, version=gochatd.__version__,
                          concurrency=int(self._pool.limiter.total_tokens),
                          in_flight=len(self._pool.jobs),
                          paused=lifecycle.paused, draining=lifecycle.draining,
                          handlers=self._handlers_json())

    def lacking_peers(self) -> bool:
        """Whether a live daemon of this one's queues lacks some of its job types (as of
        the last pass)."""
        return self._lacking_peers

    def handlers(self) -> DaemonHandlers | None:
        """This daemon's set; None until it set its store's (before its first claim)."""
        runnable = self._store.runnable
        if runnable.any_type:
            return None
        return DaemonHandlers(runnable, frozenset(self._queues.queues))

    def _handlers_json(self) -> str | None:
        mine = self.handlers()
        return None if mine is None else mine.to_json()

    async def _live_peers(self) -> list[DaemonRow]:
        return [r for r in await self._store.list_daemons()
                if r.heartbeat_age_s <= ALIVE_S and r.beat.id != self._worker_id]

    async def _see_peers(self) -> None:
        mine = self.handlers()
        if mine is None:
            return
        self._lacking_peers = any(r.handlers is not None and r.handlers.lacks_some_of(mine)
                                 for r in await self._live_peers())

    async def without_handler(self) -> list[WaitingJobs]:
        """Due waiting jobs that no live daemon (this one included) can run."""
        waiting = await self._store.waiting_job_types()
        if not waiting:
            return []
        peers = [r.handlers for r in await self._live_peers()]
        mine = self.handlers()
        return without_handler(waiting, [*peers, mine] if mine is not None else peers)

    async def run_once(self, *, see_peers: bool = True) -> FleetResult:
        async with self._lock:
            request = await self._store.upsert_daemon(self.beat())
            if see_peers:
                await self._see_peers()
            if request is None:
                return FleetResult(None)
            self._apply(request.action)
            await self._store.clear_daemon_request(self._worker_id, request.seq)
            await self._store.upsert_daemon(self.beat())
            return FleetResult(request.action)

    def _apply(self, action: str) -> None:
        self._log.info("fleet_request_applied", action=action)
        if action == "drain":
            self._lifecycle.drain()
        elif action == "pause":
            self._lifecycle.pause()
        elif action == "resume":
            self._lifecycle.resume()

    async def remove(self) -> None:
        """A clean stop: this daemon leaves the fleet view. Shielded and bounded."""
        with trio.CancelScope(shield=True), trio.move_on_after(REMOVE_S):
            try:
                await self._store.remove_daemon(self._worker_id)
            except StoreUnavailable as exc:
                self._counters.transient_error("fleet_failed", exc)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        task_status.started()
        peers_read_at, stale = -PEERS_S, True  # stale: the fleet changed since the read
        while True:
            now = trio.current_time()
            see_peers = (stale or now - peers_read_at >= PEERS_S
                         or not self._store.control_notifications)
            try:
                await self.run_once(see_peers=see_peers)
                if see_peers:
                    peers_read_at, stale = now, False
            except StoreUnavailable as exc:
                self._counters.transient_error("fleet", exc)
            if await wait_for_change(self._store, "fleet", short_s=BEAT_S, fallback_s=BEAT_S):
                stale = True
