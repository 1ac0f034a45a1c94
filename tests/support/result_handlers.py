"""Handlers that return results (docs/results.md), loaded by a real daemon with
``--handlers tests.support.result_handlers``.

``test:answer`` returns ``{"answer": 2 * payload n, "text": "héllo"}``; ``test:huge`` returns a
string longer than ``worker.max_result_bytes`` when it is set to less than 1000.
"""

from __future__ import annotations

from typing import Any

import gochatd
from gochatd.context import JobContext


@gochatd.job("test:answer")
async def answer(ctx: JobContext) -> dict[str, Any]:
    n = ctx.payload.get("n")
    return {"answer": 2 * n if isinstance(n, int) else None, "text": "héllo"}


@gochatd.job("test:huge")
async def huge(ctx: JobContext) -> str:
    return "secret-" + "x" * 1000
