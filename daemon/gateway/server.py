"""The gateway on its own listener (``gateway.listen``): only ``POST /v1/jobs`` and
``POST /v1/jobs:batch``, served by hypercorn in the daemon's root nursery."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio
from hypercorn.config import Config
from quart_trio import QuartTrio

from gochatd.admin.http import register_errors, reject_unknown_query
from gochatd.admin.openapi import openapi_document
from gochatd.admin.server import ShieldedSend, start_listener
from gochatd.gateway import api as gateway_api
from gochatd.gateway.jobs import register_job_route

if TYPE_CHECKING:
    from gochatd.worker.control import Control


def create_gateway_app(daemon: Control) -> QuartTrio:
    app = QuartTrio("gochatd.gateway")
    app.config["MAX_CONTENT_LENGTH"] = daemon.settings.admin_max_body_bytes
    app.config["JSON_SORT_KEYS"] = False
    reject_unknown_query(app, openapi_document(gateway=True))
    register_errors(app, daemon)
    gateway_api.register(app, daemon)
    register_job_route(app, daemon)  # GET /v1/jobs/<id>[?wait_s=] (docs/results.md)
    return app


async def serve_gateway(
    daemon: Control,
    shutdown_trigger: Callable[[], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    listen = daemon.settings.gateway_listen
    config = Config()
    config.bind = [listen]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 5.0
    config.keep_alive_timeout = 5.0
    app = ShieldedSend(create_gateway_app(daemon))
    async with trio.open_nursery() as nursery:
        binds = await start_listener(nursery, app, config, shutdown_trigger, "gateway.listen",
                                     listen)
        address = binds[0] if binds else listen
        daemon.log.info("gateway_listening", address=address)
        task_status.started(address)
