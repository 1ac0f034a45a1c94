"""The daemon: builds the components, starts them in one root nursery, and stops them.

    root nursery (inside: signal watcher + start scope > store, Redis, trio-asyncio loop)
     ├── finisher        batches fenced finishes, then XACKs          worker/finisher.py
     ├── reaper          expired leases -> retrying/dead              loops/reap.py
     ├── retention       deletes old finished jobs in batches         loops/retention.py
     ├── stats           finish tally -> per-minute counters          loops/stats.py
     ├── fleet           this daemon's fleet row; operator requests   loops/fleet.py
     ├── heartbeat       extends leases, sees cancels                 worker/heartbeat.py
     ├── notify          LISTEN/NOTIFY or data_version wake-ups       worker/notify.py
     ├── pauses          fleet-wide queue pauses from the store       loops/pauses.py
     ├── routes          tenant routes (gochatd move); acks them      migrate/routing/follower.py
     ├── scheduler       due/delayed dispatch + sweep + trim (Redis)  loops/schedule.py
     ├── watchdog        WATCHDOG=1 / STATUS= ($NOTIFY_SOCKET only)   obs/watchdog.py
     ├── periodic        each due periodic slot once (if declared)    periodic_jobs/loop.py
     ├── outbox          reply_outbox -> providers (if channels)      outbox/loop.py
     │    └── outbox-<id>  one delivery per claimed row
     ├── gateway probe   Redis probe for the rate limiter             gateway/gateway.py
     ├── gateway         its own listener (gateway.listen only)       gateway/server.py
     ├── admin           hypercorn + quart-trio (unless off)          admin/server.py
     └── job pool        handler nursery, CapacityLimiter(concurrency) worker/pool.py
          ├── intake         stream consumer | database poller        worker/intake.py
          ├── capped backlog capped tenants' and queues' jobs         worker/capped_backlog.py
          └── job-<id>       one runner per claimed job               worker/runner.py

A job is claimed in ``worker/intake.py``, run in ``worker/pool.py`` (via ``worker/runner.py``) and
finished in ``worker/finisher.py``. The state (starting, streams, polling, paused, draining, stopping,
stopped) and its moves are ``worker/lifecycle.py``'s; the admin API sees ``worker/control.py``.

Stop: the claims end (no new claims) -> in-flight handlers get ``shutdown_grace_s`` ->
the rest are interrupted (back to retrying, attempt refunded) -> the finish channel is
closed by its owner (the pool) -> the finisher drains -> the admin server finishes its
requests -> the root nursery is cancelled -> the last finish counts are flushed and this
daemon's fleet row is removed (both shielded, bounded). A second stop skips what is left of the grace:
handlers are interrupted at once and written back within ``STOP_NOW_S`` (exit 0; 1 if that
bound ran out). A third cancels the root (exit 1, within ``ABANDON_S``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import trio

from gochatd.client.client import Client
from gochatd.config.reload import Reloader
from gochatd.config.settings import Settings
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import StoreUnavailable
from gochatd.gateway.gateway import Gateway, GatewayProbe
from gochatd.gateway.settings import max_running_limits
from gochatd.loops.fleet import FleetBeat
from gochatd.loops.pauses import PauseFollower
from gochatd.loops.reap import ReapConfig, Reaper
from gochatd.loops.retention import Retention, RetentionPolicy
from gochatd.loops.schedule import ScheduleConfig, Scheduler
from gochatd.loops.stats import StatsFlusher
from gochatd.migrate.routing.follower import RouteFollower
from gochatd.model import Job
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.obs.metrics import Metrics
from gochatd.obs.redact import mask_url
from gochatd.obs.sdnotify import Notifier
from gochatd.obs.watchdog import Watchdog
from gochatd.outbox.loop import OutboxConfig, OutboxSender, build_providers
from gochatd.outbox.metrics import OutboxMetrics
from gochatd.periodic_jobs.loop import PeriodicEnqueuer, checked_specs
from gochatd.periodic_jobs.specs import effective_specs
from gochatd.store import RoutingStore, open_routed_store
from gochatd.store.presence import require_schema, sqlite_file
from gochatd.store.startup import open_until_connected
from gochatd.worker.capped_backlog import BacklogConfig, CappedBacklog
from gochatd.worker.control import Control
from gochatd.worker.finisher import Finisher
from gochatd.worker.heartbeat import Heartbeat
from gochatd.worker.http_handlers import HttpHandlers
from gochatd.worker.intake import Intake, IntakeConfig
from gochatd.worker.job_types import adopt_handlers
from gochatd.worker.lifecycle import STOP_NOW_S, Lifecycle, State
from gochatd.worker.notify import NotifyListener
from gochatd.worker.pool import ActiveJobs, FinishOutcomes, JobPool
from gochatd.worker.queues import QueueSelection
from gochatd.worker.registry import REGISTRY, Registry
from gochatd.worker.runner import RunPolicy
from gochatd.worker.runtimes import loop_for
from gochatd.worker.signals import watching_signals
from gochatd.worker.wakeup import Wakeups

#: In-flight admin requests get this long to finish once everything else has stopped.
ADMIN_GRACE_S = 5.0
#: The finisher gets this long to write the last states after every handler returned.
FINAL_FLUSH_S = 10.0

Loop = Callable[..., Awaitable[Any]]


class Reconfigurable(Protocol):
    def reconfigure(self, settings: Settings) -> None: ...


class Worker:
    """The composition root: one per ``gochatd serve``. It holds the components, not
    their state."""

    def __init__(
        self,
        settings: Settings,
        *,
        registry: Registry = REGISTRY,
        migrate: bool = False,
        reload_args: dict[str, Any] | None = None,
        gateway: bool = True,
    ) -> None:
        self.registry = registry
        self.worker_id = worker_id = settings.effective_worker_id()
        self.migrate_on_start = migrate or settings.database_url.startswith("sqlite:")
        self.log = get_logger(worker_id=worker_id)
        self.reloader = Reloader(settings, self._apply_reloadable, reload_args=reload_args,
                                 worker_id=worker_id)
        self.store: RoutingStore = open_routed_store(
            settings.database_url, pool_size=settings.worker_db_pool_size,
            listen_url=settings.database_listen_url, prepare=settings.database_prepare)
        self.streams = (RedisStreams.from_settings(settings, consumer=worker_id)
                        if settings.redis_url else None)
        self.counters = Counters(worker_id)
        self.wakeups = Wakeups()
        self.queues = QueueSelection(settings.worker_queues,
                                     strict=settings.worker_strict_priority)
        self.client = Client(store=self.store, max_payload_bytes=settings.worker_max_payload_bytes,
                             on_enqueued=self._on_enqueued)
        self.jobs = ActiveJobs()
        self.lifecycle = Lifecycle(self.jobs, notifier=Notifier(), wakeups=self.wakeups,
                                   counters=self.counters, worker_id=worker_id,
                                   on_dispatch=self._on_dispatch)
        self.metrics = Metrics(registry.job_types)
        self.metrics.watch(lambda: self.counters, self.jobs.__len__,
                           lambda: self.lifecycle.mode.value, lambda: self.counters.finished.totals)
        # The gateway (POST /v1/jobs) runs in the default mode, not with --worker-only.
        self.gateway: Gateway | None = (Gateway(settings, self.metrics.registry)
                                        if gateway and settings.gateway_listen != "off" else None)
        self.outbox_metrics = OutboxMetrics(self.metrics.registry)
        # Job types without a Python handler may be run by an HTTP endpoint (handlers.http).
        self.http_handlers = HttpHandlers(settings.handlers_http)
        self.outcomes = FinishOutcomes(self.counters, self.metrics, self.wakeups)
        self.finisher = Finisher(self.store, lambda: self.streams, self.outcomes,
                                 self.jobs.__len__)
        self.pool = JobPool(
            self.jobs, lifecycle=self.lifecycle, finisher=self.finisher, registry=registry,
            policy=self._run_policy(settings), concurrency=settings.worker_concurrency,
            grace_s=settings.worker_shutdown_grace_s, metrics=self.metrics,
            counters=self.counters, wakeups=self.wakeups, worker_id=worker_id)
        self._build_loops(settings)
        self.control = Control(
            worker_id=worker_id, store=self.store, client=self.client, gateway=self.gateway,
            lifecycle=self.lifecycle, jobs=self.jobs, counters=self.counters,
            queues=self.queues, pauses=self.pauses, fleet=self.fleet, reloader=self.reloader,
            wakeups=self.wakeups, metrics=self.metrics, outbox_metrics=self.outbox_metrics,
            log=self.log)
        self.admin_address: str | None = None
        self.gateway_address: str | None = None
        self._admin_shutdown = trio.Event()
        self._admin_stopped = trio.Event()
        self._apply_reloadable(settings)

    def _build_loops(self, settings: Settings) -> None:
        """Each loop with its validated config and the few collaborators it needs."""
        store, counters, wakeups, wid = self.store, self.counters, self.wakeups, self.worker_id
        self.reaper = Reaper(ReapConfig.from_settings(settings), store=store,
                             counters=counters, wakeups=wakeups, worker_id=wid)
        self.retention = Retention(RetentionPolicy.from_settings(settings),
                                   settings.retention_interval_s, store=store,
                                   metrics=self.metrics, counters=counters, worker_id=wid)
        self.heartbeat = Heartbeat(store=store, jobs=self.jobs, worker_id=wid,
                                   lease_s=settings.worker_lease_s, counters=counters)
        self.stats = StatsFlusher(store=store, tally=self.outcomes.tally, counters=counters)
        self.fleet = FleetBeat(store=store, lifecycle=self.lifecycle, pool=self.pool,
                               queues=self.queues, counters=counters, worker_id=wid)
        self.notify = NotifyListener(store=store, wakeups=wakeups, counters=counters)
        self.pauses = PauseFollower(store=store, queues=self.queues, wakeups=wakeups,
                                    counters=counters, worker_id=wid)
        self.routes = RouteFollower(store=store, worker_id=wid, wakeups=wakeups,
                                    counters=counters)
        self.scheduler = Scheduler(ScheduleConfig.from_settings(settings), store=store, streams=self.streams,
            queues=self.queues, lifecycle=self.lifecycle, wakeup=wakeups.schedule,
            counters=counters, worker_id=wid) if self.streams is not None else None
        self.watchdog = Watchdog(notifier=self.lifecycle.notifier, lifecycle=self.lifecycle)
        specs = checked_specs(effective_specs(settings.periodic), self.registry,
                              settings.worker_max_payload_bytes)
        self.periodic = PeriodicEnqueuer(
            specs, store=store, registry=self.registry, lifecycle=self.lifecycle,
            max_payload_bytes=settings.worker_max_payload_bytes, counters=counters,
            on_enqueued=self._on_enqueued, worker_id=wid) if specs else None
        providers = build_providers(settings) if settings.outbox_enabled else {}
        self.outbox = OutboxSender(
            OutboxConfig.from_settings(settings), providers, store=store, worker_id=wid,
            wakeup=wakeups.outbox, metrics=self.outbox_metrics, counters=counters) if providers else None
        self.intake = Intake(IntakeConfig.from_settings(settings), store=store,
                             streams=self.streams, pool=self.pool, queues=self.queues,
                             lifecycle=self.lifecycle, wakeups=wakeups, counters=counters,
                             worker_id=wid)
        self.capped_backlog = CappedBacklog(
            BacklogConfig.from_settings(settings), store=store, pool=self.pool, queues=self.queues,
            lifecycle=self.lifecycle, worker_id=wid, counters=counters, peers=self.fleet.lacking_peers,
            claims=self.intake.claims)

    # -- settings --------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.reloader.settings

    def _run_policy(self, settings: Settings) -> RunPolicy:
        return RunPolicy.from_settings(settings, self.http_handlers.resolve if self.http_handlers else None,
                                       self.store.job_links)

    def _apply_reloadable(self, settings: Settings) -> None:
        self.pool.reconfigure(settings.worker_concurrency, settings.worker_shutdown_grace_s,
                              self._run_policy(settings))
        self.queues.reconfigure(settings)
        self.store.tenant_limits = max_running_limits(settings.tenants)
        self.store.queue_limits = settings.worker_queue_limits
        self.store.priority_aging_s = settings.worker_priority_aging_s
        if self.gateway is not None:
            self.gateway.apply(settings)
        if self.streams is not None:
            self.streams.block_s = settings.worker_redis_block_timeout_s
        loops: tuple[Reconfigurable | None, ...] = (
            self.reaper, self.retention, self.scheduler, self.outbox, self.intake,
            self.capped_backlog)
        for loop in loops:
            if loop is not None:
                loop.reconfigure(settings)
        self.wakeups.new_work()
        self.wakeups.slot_freed.set()

    def reload(self, *, strict: bool = False) -> tuple[list[str], list[str]]:
        return self.reloader.reload(strict=strict)

    # -- what tests and the bench read -------------------------------------------------------

    @property
    def mode(self) -> State:
        return self.lifecycle.mode

    def queue_order(self) -> list[str]:
        return self.queues.order()

    def request_stop(self, *, force: bool = False) -> None:
        self.lifecycle.request_stop(force=force)

    # -- wiring callbacks ------------------------------------------------------------------

    def _on_enqueued(self, job: Job) -> None:
        if job.dispatched_at is None:
            self.wakeups.new_work()

    def _on_dispatch(self, mode: State) -> None:
        self.client.dispatch_ok = mode is State.STREAMS

    # -- running ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _resources(self) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if self.store.dialect == "postgres":
                await open_until_connected(self.store, self.log)
            else:
                await self.store.open()
            stack.push_async_callback(self._close_store)
            if self.migrate_on_start:
                applied = await self.store.migrate()
                if applied:
                    self.log.info("migrations_applied", applied=applied)
            else:
                await require_schema(self.store, self.settings.database_url,
                                     "run 'gochatd db upgrade' or start with --upgrade")
            if self.streams is not None:
                await self.streams.open()
                stack.push_async_callback(self._close_streams)
                await self.streams.check_url()
                self.client.streams = self.streams
            if self.gateway is not None:
                await self.gateway.limiter.open()
                stack.push_async_callback(self.gateway.limiter.close)
            if self.http_handlers:
                await self.http_handlers.open()
                stack.push_async_callback(self.http_handlers.aclose)
            await stack.enter_async_context(loop_for(self.registry.runtimes()))  # asyncio handlers
            yield

    async def _close_store(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            with contextlib.suppress(StoreUnavailable):
                await self.routes.forget_ack()
            await self.store.close()

    async def _close_streams(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            assert self.streams is not None
            await self.streams.close()

    def _root_loops(self) -> list[Loop]:
        """The root nursery's loops, in start order (each calls ``task_status.started()``)."""
        loops: list[Loop] = [self.finisher.run, self.reaper.run, self.retention.run,
                             self.stats.run, self.fleet.run, self.heartbeat.run,
                             self.notify.run, self.pauses.run, self.routes.run]
        if self.scheduler is not None:
            loops.append(self.scheduler.run)
        if self.watchdog.enabled:
            loops.append(self.watchdog.run)
        if self.periodic is not None:
            loops.append(self.periodic.run)
        if self.outbox is not None:
            loops.append(self.outbox.run)
        if self.gateway is not None:
            loops.append(GatewayProbe(self.gateway, worker_id=self.worker_id).run)
        return loops

    async def run(self, *, handle_signals: bool = False) -> int:
        """Run until stopped; the exit code. A stop signal before ``begin()`` cancels the
        start scope, which holds the resources."""
        written_back: bool | None = None  # None: stopped before it ran
        async with (watching_signals(self.lifecycle, self.reloader, self.log,
                                     enabled=handle_signals) as watch, self._resources()):
            if watch.begin():
                written_back = await self._serve()
        if written_back is None:
            return watch.stopped_before_start()
        forced = self.counters["forced_stop"] > 0 or not written_back
        self.lifecycle.finished()
        self.log.info("worker_stopped", forced=forced, stop_now=self.lifecycle.stop_now)
        return 1 if forced else 0

    async def _serve(self) -> bool:
        """The root nursery until it stops; False unless every last state was written."""
        s = self.settings
        self.log.info("worker_starting", database=mask_url(s.database_url),
                      database_file=str(sqlite_file(s.database_url) or "") or None,
                      redis=mask_url(s.redis_url) or None, concurrency=s.worker_concurrency,
                      queues=self.queues.queues)
        # Before any claim: claims take only these handlers' types, and producers get their
        # options (docs/job-types.md). Not reloadable (a restart publishes again).
        await adopt_handlers(self.store, self.registry, self.http_handlers.routes,
                             self.worker_id, self.log)
        written_back = False
        async with trio.open_nursery() as root:
            self.lifecycle.bind_root(root.cancel_scope)
            for loop in self._root_loops():
                await root.start(loop)
            await self._start_servers(root)
            await self.pool.serve([self.intake.run, self.capped_backlog.run])
            written_back = await self._stop_rest(root)
        if written_back and not self.counters["forced_stop"]:  # the last counts; this
            await self.stats.flush_final()  # daemon leaves the fleet view (both bounded)
            await self.fleet.remove()
        return written_back

    async def _start_servers(self, root: trio.Nursery) -> None:
        if self.gateway is not None and self.settings.gateway_listen:
            self.gateway_address = await root.start(self._run_gateway)
            self.control.listening["gateway"] = self.gateway_address
        if self.settings.admin_listen != "off":
            self.admin_address = await root.start(self._run_admin)
            self.control.listening["admin"] = self.admin_address
        else:
            self._admin_stopped.set()

    async def _stop_rest(self, root: trio.Nursery) -> bool:
        """After the pool: the finisher writes the last states, the admin server drains
        its requests (graceful), then everything else stops. True if all was written."""
        stop_now = self.lifecycle.stop_now
        with trio.move_on_after(STOP_NOW_S if stop_now else FINAL_FLUSH_S):
            await self.finisher.finished.wait()
        written_back = self.finisher.finished.is_set()
        self._admin_shutdown.set()
        with trio.move_on_after(STOP_NOW_S if self.lifecycle.stop_now else ADMIN_GRACE_S):
            await self._admin_stopped.wait()
        root.cancel_scope.cancel()
        return written_back

    async def _run_admin(self, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        from gochatd.admin.server import serve_admin

        try:
            await serve_admin(self.control, self._admin_shutdown.wait, task_status=task_status)
        finally:
            self._admin_stopped.set()

    async def _run_gateway(
        self, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The gateway on its own listener (gateway.listen); it stops with the admin API."""
        from gochatd.gateway.server import serve_gateway

        await serve_gateway(self.control, self._admin_shutdown.wait, task_status=task_status)

