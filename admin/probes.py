"""Liveness, readiness, status and Prometheus metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from quart import Response, jsonify
from quart_trio import QuartTrio

from gochatd import control
from gochatd.errors import StoreUnavailable

if TYPE_CHECKING:
    from gochatd.service import Worker

STORE_CHECK_S = 2.0


def register(app: QuartTrio, worker: Worker) -> None:
    @app.get("/healthz")
    async def healthz() -> Response:
        # Answering at all proves the event loop is turning.
        return jsonify({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> Response:
        store_ok = False
        with trio.move_on_after(STORE_CHECK_S):
            try:
                await worker.store.paused_queues()
                store_ok = True
            except StoreUnavailable:
                pass
        if worker.stopping:
            dispatch = "down"
        else:
            dispatch = worker.mode.value if worker.mode.value in ("streams", "polling") else "down"
        ready = store_ok and not worker.draining and not worker.stopping and dispatch != "down"
        body = {
            "status": "ready" if ready else "not_ready",
            "store": "ok" if store_ok else "down",
            "dispatch": dispatch,
            "draining": worker.draining,
        }
        response = jsonify(body)
        response.status_code = 200 if ready else 503
        return response

    @app.get("/v1/status")
    async def status() -> Response:
        return jsonify(control.status(worker))

    @app.get("/metrics")
    async def metrics() -> Response:
        try:
            with trio.move_on_after(STORE_CHECK_S):
                worker.metrics.set_queue_stats(await worker.store.queue_stats())
                worker.outbox_metrics.set_stats(await worker.store.outbox_stats())
                if worker.settings.tenants:
                    worker.metrics.set_tenant_running(
                        worker.settings.tenants, await worker.store.running_by_tenant())
        except StoreUnavailable:
            pass  # depth gauges keep their last values; counters are still served
        return Response(generate_latest(worker.metrics.registry), content_type=CONTENT_TYPE_LATEST)
