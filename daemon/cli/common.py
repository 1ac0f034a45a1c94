"""What the subcommands share: the usage error, settings from the flags, a client on the
existing database, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from gochatd.client.client import Client
from gochatd.config.settings import Settings, load_settings
from gochatd.errors import UserError
from gochatd.model import Job
from gochatd.store.presence import require_database_file, require_schema


class UsageError(UserError):
    pass


def settings_from(args: argparse.Namespace) -> Settings:
    flags = {
        "database_url": getattr(args, "database_url", None),
        "redis_url": getattr(args, "redis_url", None),
        "handlers": getattr(args, "handlers", None),
        "worker.queues": getattr(args, "queues", None),
        "worker.concurrency": getattr(args, "concurrency", None),
        "admin.listen": getattr(args, "admin_listen", None),
    }
    return load_settings(config_file=args.config, flags=flags)


def run_async(fn: Callable[[], Awaitable[int]]) -> int:
    return trio.run(fn)


async def with_client(settings: Settings, fn: Callable[[Client], Awaitable[int]]) -> int:
    """Run ``fn`` with a client on the existing database (never one made here)."""
    require_database_file(settings.database_url)
    async with Client(
        settings.database_url, settings.redis_url or None,
        max_payload_bytes=settings.worker_max_payload_bytes,
        stream_prefix=settings.worker_redis_stream_prefix,
        consumer_group=settings.worker_redis_consumer_group,
        database_prepare=settings.database_prepare,
        redis_cluster=settings.redis_cluster,
    ) as client:
        assert client.store is not None
        await require_schema(client.store, settings.database_url)
        return await fn(client)


def public(job: Job) -> dict[str, Any]:
    return job.to_dict()


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
