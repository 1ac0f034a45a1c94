"""Operator controls of one worker process: drain, pause, resume, status. Used by the admin
API; fleet-wide queue pauses live in the store instead."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import gochatd

if TYPE_CHECKING:
    from gochatd.service import Worker


def drain(worker: Worker, *, exit_when_drained: bool = False) -> None:
    """Stop claiming; in-flight jobs finish. With exit_when_drained, exit 0 once idle."""
    worker.draining = True
    worker.exit_when_drained = exit_when_drained or worker.exit_when_drained
    worker.log.info("worker_drain_requested", exit_when_drained=worker.exit_when_drained,
                    in_flight=len(worker.active))
    if exit_when_drained:
        worker.notifier.stopping(worker.status_line())
    else:
        worker.notifier.status(worker.status_line())
    if worker.exit_when_drained and not worker.active:
        worker.request_stop()


def pause(worker: Worker) -> None:
    """Stop claiming in this process only (readiness unchanged)."""
    worker.paused_local = True
    worker.log.info("worker_paused")
    worker.notifier.status(worker.status_line())


def resume(worker: Worker) -> None:
    """Undo drain (unless already stopping) and pause."""
    worker.draining = False
    worker.exit_when_drained = False
    worker.paused_local = False
    worker.log.info("worker_resumed")
    worker.notifier.status(worker.status_line())
    worker.slot_freed.set()
    worker.intake_wakeup.set()


def status(worker: Worker) -> dict[str, Any]:
    now = datetime.now(UTC)
    settings = worker.settings
    return {
        "worker_id": worker.worker_id,
        "version": gochatd.__version__,
        "mode": worker.mode.value,
        "concurrency": settings.worker_concurrency,
        "in_flight": len(worker.active),
        "draining": worker.draining,
        "exit_when_drained": worker.exit_when_drained,
        "drained": worker.draining and not worker.active,
        "paused": worker.paused_local,
        "stopping": worker.stopping,
        "paused_queues": sorted(worker.paused_queues),
        "queues": dict(settings.worker_queues),
        "started_at": worker.started_at.isoformat(),
        "uptime_s": round((now - worker.started_at).total_seconds(), 3),
        "config_reloaded_at": worker.last_reload_at.isoformat() if worker.last_reload_at else None,
        "pending_restart": list(worker.pending_restart),
        "counters": dict(worker.counters),
    }
