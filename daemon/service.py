"""The daemon: one root nursery holding every loop, and the two-phase stop.

    root nursery
     ├── signals            SIGTERM/SIGINT: graceful stop, a second one: interrupt now,
     │                      a third: exit at once; SIGHUP: reload
     ├── finisher           batches fenced finishes, then XACKs    (loops/finish.py)
     ├── scheduler          due/delayed dispatch + sweep + trim    (loops/schedule.py)
     ├── reaper             expired leases -> retrying/dead        (loops/reap.py)
     ├── retention          deletes old finished jobs in batches   (loops/retention.py)
     ├── heartbeat          extends leases, sees cancels           (loops/heartbeat.py)
     ├── notify             LISTEN/NOTIFY or data_version wake-ups (loops/notify.py)
     ├── periodic           enqueues each due periodic slot once   (loops/periodic.py)
     ├── outbox             delivers reply_outbox rows via providers (loops/outbox.py)
     └── handler nursery    runners, one per job, CapacityLimiter(concurrency)
          └── intake        stream consumer or database poller     (loops/intake.py)

Stop: intake ends (no new claims) -> in-flight handlers get ``shutdown_grace_s`` ->
the rest are interrupted (back to retrying, attempt refunded) -> the finish channel is
closed by its owner -> the finisher drains -> the root nursery is cancelled.
A second stop skips what is left of the grace: handlers are interrupted at once and written
back within ``STOP_NOW_S`` (exit 0; 1 if that bound ran out). A third cancels the root (exit 1).
"""

from __future__ import annotations

import contextlib
import enum
import random
import signal
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import trio

from gochatd.client import Client
from gochatd.config import Settings, load_settings
from gochatd.dispatch.redis_streams import RedisStreams, StreamEntry
from gochatd.errors import ConfigError, DispatchUnavailable, StoreUnavailable
from gochatd.gateway.gateway import Gateway, gateway_loop
from gochatd.gateway.settings import max_running_limits
from gochatd.http_handlers import HttpHandlers
from gochatd.job_types import publish_handlers
from gochatd.logs import get_logger, reconfigure_logging
from gochatd.loops import (
    heartbeat,
    intake,
    notify,
    outbox,
    pauses,
    reap,
    routes,
    schedule,
    watchdog,
)
from gochatd.loops.finish import Finisher, FinishRequest
from gochatd.loops.periodic import checked_specs, periodic_loop
from gochatd.loops.retention import retention_loop
from gochatd.loops.tenant_backlog import tenant_backlog_loop
from gochatd.metrics import Metrics
from gochatd.model import ClaimedJob, Job
from gochatd.outbox.metrics import OutboxMetrics
from gochatd.periodic_jobs import effective_specs
from gochatd.redact import mask_url
from gochatd.registry import REGISTRY, Registry
from gochatd.retry import Backoff
from gochatd.runner import ActiveJob, RunPolicy, StopReason, execute
from gochatd.sdnotify import Notifier
from gochatd.store import RoutingStore, open_routed_store
from gochatd.store.presence import require_schema, sqlite_file
from gochatd.store.startup import open_until_connected
from gochatd.wakeup import Wakeup

#: After the grace period, interrupted handlers get this long to unwind before the
#: handler nursery is cancelled outright.
UNWIND_S = 5.0
#: In-flight admin requests get this long to finish once everything else has stopped.
ADMIN_GRACE_S = 5.0
#: The finisher gets this long to write the last states after every handler returned.
FINAL_FLUSH_S = 10.0
#: A second stop signal: handlers are interrupted at once, and everything left (their
#: unwinding, writing them back as ``interrupted``, the admin server) gets this long.
STOP_NOW_S = 2.0


class Mode(enum.StrEnum):
    STARTING = "starting"
    STREAMS = "streams"
    POLLING = "polling"
    STOPPED = "stopped"


class Worker:
    def __init__(
        self,
        settings: Settings,
        *,
        registry: Registry = REGISTRY,
        migrate: bool = False,
        reload_args: dict[str, Any] | None = None,
        gateway: bool = True,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.worker_id = settings.effective_worker_id()
        self.migrate_on_start = migrate or settings.database_url.startswith("sqlite:")
        self._reload_args = reload_args
        self.store: RoutingStore = open_routed_store(
            settings.database_url, pool_size=settings.worker_db_pool_size)
        self.streams: RedisStreams | None = None
        self.client = Client(
            store=self.store, max_payload_bytes=settings.worker_max_payload_bytes,
            on_enqueued=self._on_enqueued,
        )
        self.limiter = trio.CapacityLimiter(settings.worker_concurrency)
        self.active: dict[int, ActiveJob] = {}
        self.intake_wakeup = Wakeup()
        self.schedule_wakeup = Wakeup()
        self.slot_freed = Wakeup()
        self.mode = Mode.STARTING
        self.stopping = False
        #: A second stop request: interrupt the handlers without waiting out the grace.
        self.stop_now = False
        self._grace_scope: trio.CancelScope | None = None
        self.counters: Counter[str] = Counter()
        self.ready = trio.Event()
        self.stopped = trio.Event()
        self.log = get_logger(worker_id=self.worker_id)
        self._handlers: trio.Nursery | None = None
        self._root: trio.Nursery | None = None
        self._intake_scope: trio.CancelScope | None = None
        self._finisher: Finisher | None = None
        self._rng = random.Random()
        # control plane (admin API, signals)
        self.draining = False
        self.exit_when_drained = False
        self.paused_local = False
        self.paused_queues: frozenset[str] = frozenset()
        self.started_at = datetime.now(UTC)
        self.last_reload_at: datetime | None = None
        self.pending_restart: list[str] = []
        self.admin_address: str | None = None
        self.notifier = Notifier()
        self.metrics = Metrics(registry.job_types)
        self.metrics.watch(lambda: self.counters, lambda: len(self.active), lambda: self.mode.value)
        # The gateway (POST /v1/jobs) runs in the default mode, not with --worker-only.
        self.gateway: Gateway | None = (
            Gateway(settings, self.metrics.registry)
            if gateway and settings.gateway_listen != "off" else None
        )
        self.gateway_address: str | None = None
        self._admin_shutdown = trio.Event()
        self._admin_stopped = trio.Event()
        # The reply outbox: set by completions that wrote replies; the sender waits on it.
        self.outbox_wakeup = Wakeup()
        self.outbox_metrics = OutboxMetrics(self.metrics.registry)
        self.outbox_providers = outbox.build_providers(self) if settings.outbox_enabled else {}
        # Job types without a Python handler may be run by an HTTP endpoint (handlers.http).
        self.http_handlers = HttpHandlers(settings.handlers_http)
        self.periodic_specs = checked_specs(
            effective_specs(settings.periodic), registry, settings.worker_max_payload_bytes
        )
        self._apply_reloadable(settings)

    # -- settings --------------------------------------------------------------------------

    def _apply_reloadable(self, settings: Settings) -> None:
        self.settings = settings
        self.limiter.total_tokens = settings.worker_concurrency
        self.store.tenant_limits = max_running_limits(settings.tenants)
        self.store.priority_aging_s = settings.worker_priority_aging_s
        if self.gateway is not None:
            self.gateway.apply(settings)
        self.policy = RunPolicy(
            Backoff(settings.worker_retry_base_s, settings.worker_retry_cap_s),
            fallback=self.http_handlers.resolve if self.http_handlers else None,
        )
        if self.streams is not None:
            self.streams.block_s = settings.worker_redis_block_timeout_s

    def reload(self, *, strict: bool = False) -> tuple[list[str], list[str]]:
        """Re-read config (SIGHUP). Returns (applied, needs_restart) keys. A bad config is
        logged and changes nothing; with ``strict`` (the admin API) it is raised too."""
        args = self._reload_args or {}
        try:
            fresh = load_settings(**args)
        except ConfigError as exc:
            self.log.error("reload_rejected", error=str(exc))
            if strict:
                raise
            return [], []
        applied, restart = self.settings.diff(fresh)
        self.last_reload_at = datetime.now(UTC)
        self.pending_restart = restart
        merged = self.settings.with_changes(
            **{k.replace(".", "_"): getattr(fresh, k.replace(".", "_")) for k in applied}
        )
        self._apply_reloadable(merged)
        reconfigure_logging(merged.log_level, merged.log_format)
        self.log.info("config_reloaded", changed=applied, needs_restart=restart)
        self.intake_wakeup.set()
        self.schedule_wakeup.set()
        self.slot_freed.set()
        return applied, restart

    @property
    def queues(self) -> list[str]:
        return [q for q, w in self.settings.worker_queues.items() if w > 0]

    @property
    def intake_queues(self) -> list[str]:
        """The queues this worker claims from now: weight above zero and not paused."""
        return [q for q in self.queues if q not in self.paused_queues]

    def queue_order(self) -> list[str]:
        """This round's read order: strict by weight, or a weighted random shuffle so every
        queue with a weight above zero is sometimes first (never starved)."""
        weights = {
            q: w for q, w in self.settings.worker_queues.items()
            if w > 0 and q not in self.paused_queues
        }
        if self.settings.worker_strict_priority:
            return sorted(weights, key=lambda q: -weights[q])
        keyed = [(self._rng.random() ** (1.0 / w), q) for q, w in weights.items()]
        return [q for _, q in sorted(keyed, reverse=True)]

    def free_slots(self) -> int:
        """Handler slots free now. A job gives its slot back when its handler returns, not
        when its finish commits (the finisher batches those); claimed jobs not yet finished
        stay below twice the concurrency all the same."""
        if self.stopping or self.draining or self.paused_local:
            return 0
        unfinished_room = 2 * int(self.limiter.total_tokens) - len(self.active)
        return max(0, min(int(self.limiter.available_tokens), unfinished_room))

    @property
    def lease_s(self) -> float:
        return self.settings.worker_lease_s

    # -- enqueue wake-ups ------------------------------------------------------------------

    def _on_enqueued(self, job: Job) -> None:
        if job.dispatched_at is None:
            self.intake_wakeup.set()
            self.schedule_wakeup.set()

    # -- running jobs ----------------------------------------------------------------------

    def start_jobs(
        self, claimed: Sequence[ClaimedJob], entries: dict[int, StreamEntry] | None = None
    ) -> None:
        assert self._handlers is not None
        for job in claimed:
            active = ActiveJob(job, (entries or {}).get(job.id))
            try:
                self.limiter.acquire_on_behalf_of_nowait(active)
                has_slot = True
            except trio.WouldBlock:  # a reload lowered concurrency since the read
                has_slot = False
            self.active[job.id] = active
            self.counters["claimed"] += 1
            self._handlers.start_soon(self._run_one, active, has_slot, name=f"job-{job.id}")

    async def _run_one(self, active: ActiveJob, has_slot: bool) -> None:
        holds_slot = has_slot
        if not has_slot:
            await self.limiter.acquire_on_behalf_of(active)
            holds_slot = True
        try:
            started = trio.current_time()
            try:
                finish = await execute(active, self.registry, self.policy)
            finally:
                # The handler is done: its slot goes to the next job while the finisher
                # commits this one's outcome in a batch.
                self.limiter.release_on_behalf_of(active)
                holds_slot = False
                self.slot_freed.set()
            assert self._finisher is not None
            job = active.claimed.job
            self.metrics.observe_job(
                job.queue, job.job_type, trio.current_time() - started,
                None if job.locked_at is None
                else max(0.0, (job.locked_at - job.scheduled_at).total_seconds()),
            )
            applied = await self._finisher.submit(finish, active.entry, job)
            if finish is not None and not applied:
                self.counters["stale_rejections"] += 1
                self.log.warning("finish_rejected_stale", job_id=active.claimed.id,
                                 fence=active.claimed.fence)
        finally:
            # A job that retried at once may be claimed again (here) before this runs.
            if self.active.get(active.claimed.id) is active:
                del self.active[active.claimed.id]
            if holds_slot:
                self.limiter.release_on_behalf_of(active)
            self.slot_freed.set()
            if self.draining and self.exit_when_drained and not self.active:
                self.request_stop()

    def _on_flushed(self, batch: list[FinishRequest]) -> None:
        for request in batch:
            if request.applied and request.finish is not None:
                self.counters[f"finished_{request.finish.outcome.value}"] += 1
                if request.job is not None:
                    self.metrics.count_finished(
                        request.job.queue, request.job.job_type, request.finish.outcome.value
                    )
        if any(r.finish is not None and r.finish.status.value == "retrying" for r in batch):
            self.schedule_wakeup.set()
            self.intake_wakeup.set()
        if any(r.applied and r.finish is not None and r.finish.replies for r in batch):
            self.outbox_wakeup.set()

    # -- lifecycle -------------------------------------------------------------------------

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
                                     "run 'gochatd db upgrade' or start with --migrate")
            if self.settings.redis_url:
                self.streams = RedisStreams(
                    self.settings.redis_url,
                    prefix=self.settings.worker_redis_stream_prefix,
                    group=self.settings.worker_redis_consumer_group,
                    consumer=self.worker_id,
                    maxlen=self.settings.worker_redis_stream_maxlen,
                    block_s=self.settings.worker_redis_block_timeout_s,
                )
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
            yield

    async def _close_store(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            with contextlib.suppress(StoreUnavailable):
                # A stopped daemon no longer holds back the migrator's barrier.
                await routes.forget_ack(self)
            await self.store.close()

    async def _close_streams(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            assert self.streams is not None
            await self.streams.close()

    async def run(self, *, handle_signals: bool = False) -> int:
        """Run until stopped. Returns the process exit code."""
        written_back = False
        async with self._resources():
            self.log.info(
                "worker_starting", database=mask_url(self.settings.database_url),
                database_file=str(sqlite_file(self.settings.database_url) or "") or None,
                redis=mask_url(self.settings.redis_url) or None,
                concurrency=self.settings.worker_concurrency, queues=self.queues,
            )
            # Before any claim: producers that leave queue/max_attempts out get this
            # daemon's handlers' options from now on (docs/job-types.md). Handlers are not
            # reloadable (a restart publishes again).
            await publish_handlers(self.store, self.registry, self.worker_id, self.log)
            async with trio.open_nursery() as root:
                self._root = root
                if handle_signals:
                    root.start_soon(self._watch_signals)
                self._finisher = Finisher(
                    self.store, lambda: self.streams, self._on_flushed, lambda: len(self.active)
                )
                await root.start(self._finisher.run)
                root.start_soon(reap.reap_loop, self)
                root.start_soon(retention_loop, self)
                root.start_soon(heartbeat.heartbeat_loop, self)
                root.start_soon(schedule.schedule_loop, self)
                root.start_soon(notify.notify_loop, self)
                root.start_soon(pauses.pauses_loop, self)
                root.start_soon(routes.routes_loop, self)
                root.start_soon(watchdog.watchdog_loop, self)
                root.start_soon(periodic_loop, self, self.periodic_specs)
                if self.gateway is not None:
                    root.start_soon(gateway_loop, self)
                    if self.settings.gateway_listen:
                        self.gateway_address = await root.start(self._run_gateway)
                if self.outbox_providers:
                    await root.start(outbox.outbox_loop, self, self.outbox_providers)
                if self.settings.admin_listen != "off":
                    self.admin_address = await root.start(self._run_admin)
                else:
                    self._admin_stopped.set()
                await self._serve_handlers()
                with trio.move_on_after(STOP_NOW_S if self.stop_now else FINAL_FLUSH_S):
                    await self._finisher.finished.wait()
                written_back = self._finisher.finished.is_set()
                # The admin server drains its requests (graceful), then everything else stops.
                self._admin_shutdown.set()
                with trio.move_on_after(STOP_NOW_S if self.stop_now else ADMIN_GRACE_S):
                    await self._admin_stopped.wait()
                root.cancel_scope.cancel()
        # After the nursery: a forced stop cancels the root scope, so nothing in its body
        # after the cancelled await runs.
        forced = self.counters["forced_stop"] > 0 or not written_back
        self.mode = Mode.STOPPED
        self.stopped.set()
        self.log.info("worker_stopped", forced=forced, stop_now=self.stop_now)
        return 1 if forced else 0

    async def _run_admin(self, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        from gochatd.admin.server import serve_admin

        try:
            await serve_admin(self, self._admin_shutdown.wait, task_status=task_status)
        finally:
            self._admin_stopped.set()

    async def _run_gateway(
        self, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The gateway on its own listener (gateway.listen); it stops with the admin API."""
        from gochatd.admin.gateway_server import serve_gateway

        await serve_gateway(self, self._admin_shutdown.wait, task_status=task_status)

    async def _serve_handlers(self) -> None:
        assert self._finisher is not None
        async with self._finisher.send_channel, trio.open_nursery() as handlers:
            self._handlers = handlers
            # Claims land here (jobs start in this nursery); idle unless a tenant has a cap.
            handlers.start_soon(tenant_backlog_loop, self)
            with trio.CancelScope() as intake_scope:
                self._intake_scope = intake_scope
                if self.stopping:
                    intake_scope.cancel()
                await intake.intake_loop(self)
            self.ready.set()
            self.log.info("worker_draining", in_flight=len(self.active))
            with trio.move_on_after(self.settings.worker_shutdown_grace_s) as grace:
                self._grace_scope = grace
                if self.stop_now:
                    grace.cancel()
                await self._wait_idle()
            self._interrupt_all()
            with trio.move_on_after(STOP_NOW_S if self.stop_now else UNWIND_S):
                await self._wait_idle()
            handlers.cancel_scope.cancel()

    async def _wait_idle(self) -> None:
        while self.active:
            await self.slot_freed.wait(0.1)

    def _interrupt_all(self) -> None:
        for active in list(self.active.values()):
            active.stop(StopReason.INTERRUPTED)

    def request_stop(self, *, force: bool = False) -> None:
        """First call: stop claiming, let handlers finish within the grace. Second call
        (or ``force``): interrupt the handlers now and write them back, bounded. Third:
        cancel everything at once; leases expire and the reaper recovers the jobs."""
        if self.stop_now:
            self.counters["forced_stop"] += 1
            self.log.warning("worker_stop_abandoned", in_flight=len(self.active))
            if self._root is not None:
                self._root.cancel_scope.cancel()
            return
        if force or self.stopping:
            self.stop_now = True
            self.log.warning("worker_stop_now", in_flight=len(self.active), bound_s=STOP_NOW_S)
            if self._grace_scope is not None:
                self._grace_scope.cancel()
            self._interrupt_all()
            if not self.stopping:
                self._begin_stop()
            return
        self._begin_stop()

    def _begin_stop(self) -> None:
        self.stopping = True
        self.log.info("worker_stop_requested")
        self.notifier.stopping(f"stopping; in flight {len(self.active)}")
        if self._intake_scope is not None:
            self._intake_scope.cancel()
        self.slot_freed.set()

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    self.reload()
                else:
                    self.request_stop(force=self.stopping)

    # -- mode bookkeeping ------------------------------------------------------------------

    def set_mode(self, mode: Mode) -> None:
        if mode is not self.mode:
            self.log.info("dispatch_mode", mode=mode.value, previous=self.mode.value)
            self.mode = mode
            self.client.dispatch_ok = mode is Mode.STREAMS
            self.schedule_wakeup.set()
        if not self.ready.is_set():
            self.ready.set()
            self.notifier.ready(self.status_line())
        else:
            self.notifier.status(self.status_line())

    def status_line(self) -> str:
        state = (
            "stopping" if self.stopping else "draining" if self.draining
            else "paused" if self.paused_local else "serving"
        )
        return f"{state}; mode {self.mode.value}; in flight {len(self.active)}"

    def transient_error(self, where: str, exc: StoreUnavailable | DispatchUnavailable) -> None:
        key = "redis_errors" if isinstance(exc, DispatchUnavailable) else "store_errors"
        self.counters[key] += 1
        self.log.warning(f"{where}_failed", error=str(exc))

