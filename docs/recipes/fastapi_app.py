"""FastAPI: an async Client opened and closed by the app's lifespan (docs/frameworks.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

import gochatd


def create_app(database_url: str, redis_url: str | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with gochatd.Client(database_url, redis_url) as client:
            app.state.jobs = client
            yield

    app = FastAPI(lifespan=lifespan)

    @app.post("/messages/{message_id}/reply", status_code=202)
    async def send_reply(message_id: int, request: Request) -> dict[str, int]:
        client: gochatd.Client = request.app.state.jobs
        job = await client.enqueue("message:send_reply", {"message_id": message_id},
                                   idempotency_key=f"send_reply:{message_id}")
        return {"job_id": job.id}

    return app
