"""Liveness, readiness, whether a token is required, status and Prometheus metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from prometheus_client import CONTENT_TYPE_LATEST
from quart import Response, jsonify
from quart_trio import QuartTrio

from gochatd.errors import StoreUnavailable

if TYPE_CHECKING:
    from gochatd.worker.control import Control

STORE_CHECK_S = 2.0


def register(app: QuartTrio, daemon: Control) -> None:
    @app.get("/healthz")
    async def healthz() -> Response:
        # Answering at all proves the event loop is turning.
        return jsonify({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> Response:
        store_ok = False
        with trio.move_on_after(STORE_CHECK_S):
            try:
                await daemon.store.paused_queues()
                store_ok = True
            except StoreUnavailable:
                pass
        if daemon.stopping:
            dispatch = "down"
        else:
            dispatch = daemon.mode.value if daemon.mode.value in ("streams", "polling") else "down"
        write_error = daemon.store_write_error
        ready = (store_ok and write_error is None and not daemon.draining and not daemon.stopping
                 and dispatch != "down")
        body = {
            "status": "ready" if ready else "not_ready",
            "store": "down" if not store_ok else "ok" if write_error is None else "failing",
            "dispatch": dispatch,
            "draining": daemon.draining,
            # Ready but degraded: jobs run (polling) while Redis is down, and this says why.
            "degraded": daemon.degraded,
        }
        if store_ok and write_error is not None:
            body["store_error"] = write_error
        response = jsonify(body)
        response.status_code = 200 if ready else 503
        return response

    @app.get("/v1/auth")
    async def auth() -> Response:
        # Served without the token (app.OPEN_PATHS): the dashboard's token field says whether
        # one is needed. Only that boolean: nothing else of the API is readable without it.
        return jsonify({"token_required": bool(daemon.settings.admin_token)})

    @app.get("/v1/status")
    async def status() -> Response:
        return jsonify(daemon.status())

    @app.get("/metrics")
    async def metrics() -> Response:
        try:
            with trio.move_on_after(STORE_CHECK_S):
                daemon.metrics.set_queue_stats(await daemon.store.queue_stats())
                daemon.outbox_metrics.set_stats(await daemon.store.outbox_stats())
                daemon.metrics.set_without_handler(await daemon.jobs_without_handler())
                if daemon.settings.tenants:
                    daemon.metrics.set_tenant_running(
                        daemon.settings.tenants, await daemon.store.running_by_tenant())
        except StoreUnavailable:
            pass  # depth gauges keep their last values; counters are still served
        return Response(daemon.metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
