"""A daemon SIGKILLed while its webhook delivery is in flight: once the sending lease
expires, another daemon delivers the reply again with the same Idempotency-Key, and the
receiver, deduping by that key, sees it exactly once. The job itself ran once."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.daemon_process import DaemonFactory, poll_until
from tests.support.e2e_jobs import enqueue_many, query
from tests.support.webhook_receiver import WebhookReceiver

SECRET_ENV = "OUTBOX_E2E_SECRET"
SECRET = "e2e-webhook-secret"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver(SECRET.encode()).start()
    yield server
    server.stop()


def _env(pg_url: str, receiver: WebhookReceiver) -> dict[str, str]:
    channels = {"wa": {"provider": "webhook", "url": receiver.url, "secret_env": SECRET_ENV,
                       "timeout_s": 30, "retry_base_s": 0.05, "retry_cap_s": 0.2}}
    return {
        "GOCHAT_DATABASE_URL": pg_url,
        "GOCHAT_HANDLERS": "tests.support.reply_handlers",
        "GOCHAT_LOG_FORMAT": "json",
        "GOCHAT_WORKER_POLL_INTERVAL_MAX_S": "0.2",
        "GOCHAT_OUTBOX_CHANNELS": json.dumps(channels),
        "GOCHAT_OUTBOX_LEASE_S": "1",
        "GOCHAT_OUTBOX_POLL_S": "0.2",
        SECRET_ENV: SECRET,
    }


def _outbox(pg_url: str) -> list[tuple[str, int, str | None]]:
    return [(str(r[0]), int(r[1]), r[2]) for r in
            query(pg_url, "SELECT status, attempts, lease_owner FROM reply_outbox ORDER BY id")]


def test_sigkill_mid_delivery_is_redelivered_with_the_same_key(
    pg_jobs: str, receiver: WebhookReceiver, daemons: DaemonFactory
) -> None:
    env = _env(pg_jobs, receiver)
    a = daemons.start("a", env={**env, "GOCHAT_WORKER_ID": "daemon-a"})
    receiver.hold()  # A's POST arrives and waits for an answer that never comes
    [job_id] = enqueue_many(pg_jobs, "test:reply", [{"key": "conv-9:msg-1", "text": "hello"}])
    poll_until(lambda: receiver.arrived >= 1, timeout_s=20, what="A's delivery in flight")
    assert _outbox(pg_jobs) == [("sending", 1, "daemon-a")]
    a.kill9()

    b = daemons.start("b", env={**env, "GOCHAT_WORKER_ID": "daemon-b"})
    receiver.release()  # A's connection is gone; B's delivery is answered at once
    poll_until(lambda: _outbox(pg_jobs)[0][0] == "sent", timeout_s=20,
               what="B to deliver the reaped reply")
    [(status, attempts, owner)] = _outbox(pg_jobs)
    assert (status, attempts, owner) == ("sent", 2, "daemon-b")
    got = receiver.snapshot()
    assert got and {r.key for r in got} == {"conv-9:msg-1"}
    assert all(r.signature_ok for r in got)
    assert list(receiver.accepted) == ["conv-9:msg-1"]
    assert receiver.accepted["conv-9:msg-1"]["body"] == {"text": "hello"}
    # The job completed once, on A, before the kill: the outage never re-ran it.
    [(job_status, job_attempts)] = query(
        pg_jobs, "SELECT status, attempts FROM background_jobs WHERE id = %s", [job_id])
    assert (job_status, job_attempts) == ("completed", 1)
    b.wait_for_event("outbox_leases_reaped")
    assert b.stop() == 0
    b.assert_clean_output()
    assert SECRET not in a.log_text() + b.log_text()
