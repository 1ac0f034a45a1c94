"""Flask: one SyncClient for the app, shared by its request threads (docs/frameworks.md)."""

from __future__ import annotations

import atexit

from flask import Flask

import gochatd


def create_app(database_url: str, redis_url: str | None = None) -> Flask:
    app = Flask(__name__)
    client = gochatd.SyncClient(database_url, redis_url)
    client.open()
    atexit.register(client.close)
    app.extensions["gochatd"] = client

    @app.post("/messages/<int:message_id>/reply")
    def send_reply(message_id: int) -> tuple[dict[str, int], int]:
        job = client.enqueue("message:send_reply", {"message_id": message_id},
                             idempotency_key=f"send_reply:{message_id}")
        return {"job_id": job.id}, 202

    return app
