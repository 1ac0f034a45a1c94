"""The one place where Trio meets asyncio.

redis-py and psycopg are asyncio libraries; gochatd runs on Trio through trio-asyncio.
Each unit of work (claim a batch, finish a batch, XADD a batch) is one asyncio coroutine
crossed once with ``run_aio``: a crossing costs ~40 µs of CPU, so never cross per row.
"""

import trio_asyncio  # noqa: I001  # must be imported before psycopg (see docs/architecture.md)

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from trio_asyncio import aio_as_trio

P = ParamSpec("P")
T = TypeVar("T")

# psycopg binds asyncio.get_running_loop at import time. If something imported psycopg
# before trio_asyncio patched asyncio, re-point it at the patched function.
_waiting = sys.modules.get("psycopg.waiting")
if _waiting is not None and getattr(_waiting, "get_running_loop", None) is not (
    asyncio.get_running_loop
):
    _waiting.get_running_loop = asyncio.get_running_loop  # type: ignore[attr-defined]

open_loop = trio_asyncio.open_loop


async def run_aio(fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run one asyncio coroutine function to completion from Trio."""
    result: T = await aio_as_trio(fn)(*args, **kwargs)
    return result
