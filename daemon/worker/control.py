"""What the admin API sees of the daemon and may ask of it: a narrow view, not the daemon.

Per-process controls (drain, pause, resume) ask the ``Lifecycle`` to move; status reads it,
the job pool and the counters. Fleet-wide queue pauses live in the store instead (the
admin API writes them, then ``refresh_pauses`` applies them here at once).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import structlog

import gochatd
from gochatd.client.client import Client
from gochatd.config.reload import Reloader
from gochatd.config.settings import Settings
from gochatd.gateway.gateway import Gateway
from gochatd.io.handoff import HANDED
from gochatd.loops.fleet import FleetBeat
from gochatd.loops.pauses import PauseFollower
from gochatd.obs.counters import Counters
from gochatd.obs.metrics import Metrics
from gochatd.outbox.metrics import OutboxMetrics
from gochatd.store import RoutingStore
from gochatd.worker.lifecycle import Lifecycle, State
from gochatd.worker.pool import ActiveJobs
from gochatd.worker.queues import QueueSelection
from gochatd.worker.runnable import WaitingJobs
from gochatd.worker.wakeup import Wakeups


class Control:
    def __init__(
        self, *, worker_id: str, store: RoutingStore, client: Client, gateway: Gateway | None,
        lifecycle: Lifecycle, jobs: ActiveJobs, counters: Counters, queues: QueueSelection,
        pauses: PauseFollower, fleet: FleetBeat, reloader: Reloader, wakeups: Wakeups, metrics: Metrics,
        outbox_metrics: OutboxMetrics, log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self.worker_id = worker_id
        self.store = store
        self.client = client
        self.gateway = gateway
        self.metrics = metrics
        self.outbox_metrics = outbox_metrics
        self.log = log
        self.started_at = datetime.now(UTC)
        self._lifecycle = lifecycle
        self._jobs = jobs
        self._counters = counters
        self._queues = queues
        self._pauses = pauses
        self._fleet = fleet
        self._reloader = reloader
        self._wakeups = wakeups
        #: What the listeners took ("admin", "gateway"), set as each starts.
        self.listening: dict[str, str] = {}

    @property
    def settings(self) -> Settings:
        return self._reloader.settings

    @property
    def stopping(self) -> bool:
        return self._lifecycle.stopping

    @property
    def draining(self) -> bool:
        return self._lifecycle.draining

    @property
    def mode(self) -> State:
        return self._lifecycle.mode

    @property
    def degraded(self) -> str | None:
        """Why the daemon runs degraded (it polls while Redis is down), or None."""
        return self._lifecycle.degraded

    # -- asking -----------------------------------------------------------------------------

    def drain(self, *, exit_when_drained: bool = False) -> None:
        """Stop claiming; in-flight jobs finish. With exit_when_drained, exit 0 once idle."""
        self._lifecycle.drain(exit_when_drained=exit_when_drained)

    def pause(self) -> None:
        """Stop claiming in this process only (readiness unchanged)."""
        self._lifecycle.pause()

    def resume(self) -> bool:
        """Undo drain and pause; False when the daemon is stopping."""
        return self._lifecycle.resume()

    def reload(self) -> tuple[list[str], list[str], datetime | None]:
        applied, restart = self._reloader.reload(strict=True)
        return applied, restart, self._reloader.last_reload_at

    async def refresh_pauses(self) -> None:
        await self._pauses.run_once()

    async def jobs_without_handler(self) -> list[WaitingJobs]:
        """Due waiting jobs that no live daemon can run (docs/job-types.md)."""
        return await self._fleet.without_handler()

    @property
    def store_write_error(self) -> str | None:
        """The store error of a loop in the last few seconds (reads may still work while
        writes fail: a full disk), or None."""
        return self._counters.recent_store_error()

    async def refresh_fleet(self) -> None:
        """A request for this very daemon (POST /v1/fleet/<id>/...): apply it now."""
        await self._fleet.run_once()

    def new_work(self) -> None:
        """Jobs became claimable (an operator's requeue): wake the intake and the scheduler."""
        self._wakeups.new_work()

    def outbox_requeued(self) -> None:
        self._wakeups.outbox.set()

    # -- reading ----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        now = datetime.now(UTC)
        settings = self.settings
        lifecycle = self._lifecycle
        last_reload_at = self._reloader.last_reload_at
        return {
            "worker_id": self.worker_id,
            "version": gochatd.__version__,
            "mode": lifecycle.mode.value,
            "degraded": lifecycle.degraded,
            "concurrency": settings.worker_concurrency,
            "in_flight": len(self._jobs),
            "draining": lifecycle.draining,
            "exit_when_drained": lifecycle.exit_when_drained,
            "drained": lifecycle.draining and not len(self._jobs),
            "paused": lifecycle.paused,
            "stopping": lifecycle.stopping,
            "paused_queues": sorted(self._queues.paused),
            "queues": dict(settings.worker_queues),
            "started_at": self.started_at.isoformat(),
            "uptime_s": round((now - self.started_at).total_seconds(), 3),
            "config_reloaded_at": last_reload_at.isoformat() if last_reload_at else None,
            "pending_restart": list(self._reloader.pending_restart),
            "counters": dict(self._counters),
            "handoffs": dict(HANDED),
            "admin_address": self.listening.get("admin"),
            "gateway_address": self.listening.get("gateway"),
        }
