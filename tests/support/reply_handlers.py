"""Handlers for outbox end-to-end tests, loaded by a real daemon with
``--handlers tests.support.reply_handlers``.

``test:reply`` replies once through the channel ``payload["channel"]`` (default ``wa``) with
``payload["key"]`` as the dedupe key, and completes.
"""

import gochatd
from gochatd.context import JobContext


@gochatd.job("test:reply")
async def reply(ctx: JobContext) -> None:
    await ctx.reply(channel=ctx.payload.get("channel", "wa"), to=str(ctx.payload.get("to", "")),
                    body={"text": ctx.payload.get("text", "hi")}, dedupe_key=ctx.payload["key"])
