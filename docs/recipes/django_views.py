"""Django: enqueue from a view once the transaction commits (docs/frameworks.md)."""

from __future__ import annotations

import atexit
import threading

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.urls import path

import gochatd

_client: gochatd.SyncClient | None = None
_lock = threading.Lock()


def jobs() -> gochatd.SyncClient:
    """The process's one client, shared by every request thread, opened on first use."""
    global _client
    with _lock:
        if _client is None:
            _client = gochatd.SyncClient(settings.GOCHAT_DATABASE_URL, settings.GOCHAT_REDIS_URL)
            _client.open()
            atexit.register(_client.close)
        return _client


def send_reply(request: HttpRequest, message_id: int) -> JsonResponse:
    with transaction.atomic():
        # ... save the message with the ORM here ...
        # The job is enqueued only if this transaction commits, and after it did, so the
        # handler always finds the message (a rollback enqueues nothing).
        transaction.on_commit(lambda: jobs().enqueue(
            "message:send_reply", {"message_id": message_id},
            idempotency_key=f"send_reply:{message_id}",
        ))
    return JsonResponse({"queued": message_id}, status=202)


urlpatterns = [path("messages/<int:message_id>/reply", send_reply)]
