"""Run a Worker in-process inside the test's Trio run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from gochatd.config.settings import Settings
from gochatd.worker.registry import REGISTRY, Registry
from gochatd.worker.service import Worker


def make_settings(database_url: str, redis_url: str = "", **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "database_url": database_url,
        "redis_url": redis_url,
        "admin_listen": "off",
        "worker_lease_s": 5.0,
        "worker_shutdown_grace_s": 5.0,
        "worker_redis_block_timeout_s": 0.2,
        "worker_poll_interval_max_s": 0.2,
        "worker_reap_interval_s": 0.2,
        "worker_retry_base_s": 0.05,
        "worker_retry_cap_s": 0.2,
    }
    base.update(overrides)
    return Settings(**base)


@asynccontextmanager
async def running_worker(
    settings: Settings, *, registry: Registry = REGISTRY, migrate: bool = True
) -> AsyncIterator[Worker]:
    worker = Worker(settings, registry=registry, migrate=migrate)
    async with trio.open_nursery() as nursery:
        result: list[int] = []

        async def run() -> None:
            result.append(await worker.run())

        nursery.start_soon(run)
        with trio.fail_after(15):
            await worker.lifecycle.ready.wait()
        try:
            yield worker
        finally:
            worker.request_stop()
            with trio.fail_after(30):
                await worker.lifecycle.stopped.wait()
