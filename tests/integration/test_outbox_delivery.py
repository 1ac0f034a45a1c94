"""The reply outbox end to end in one worker: a handler's ``ctx.reply`` reaches a real
local webhook receiver that fails on demand; retries never re-run the job; 429 waits for
its Retry-After; a 4xx is dead until an operator retries it; a failed job sends nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trio

from gochatd.config.settings import Settings
from gochatd.context import JobContext
from gochatd.errors import NonRetryable
from gochatd.model import JobStatus
from gochatd.outbox.model import OutboxFilter, OutboxMessage, OutboxStatus
from gochatd.outbox.providers import ChannelConfig
from gochatd.store import JobStore
from gochatd.worker.registry import HandlerSpec, Registry
from tests.integration.helpers import (
    make_registry,
    opened_store,
    started_worker,
    wait_for_status,
)
from tests.support.harness import make_settings
from tests.support.wait import wait_until
from tests.support.webhook_receiver import Answer, WebhookReceiver

SECRET_ENV = "GOCHAT_TEST_OUTBOX_SECRET"
SECRET = "s3cret-hmac-key"
TOKEN = "admin-token-for-outbox"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookReceiver]:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    server = WebhookReceiver(SECRET.encode()).start()
    yield server
    server.stop()


def outbox_settings(url: str, receiver: WebhookReceiver, **overrides: Any) -> Settings:
    channel = ChannelConfig(name="wa", url=receiver.url, secret_env=SECRET_ENV, timeout_s=2.0,
                            retry_base_s=0.02, retry_cap_s=0.05)
    values: dict[str, Any] = {
        "outbox_channels": {"wa": channel}, "outbox_lease_s": 5.0, "outbox_poll_s": 0.2,
        **overrides,
    }
    return make_settings(url, **values)


class Replier:
    """``test:reply`` replies once per execution, then does what the payload says."""

    def __init__(self) -> None:
        self.runs: list[int] = []

    def registry(self) -> Registry:
        async def handler(ctx: JobContext) -> None:
            self.runs.append(ctx.job_id)
            await ctx.reply(channel=ctx.payload.get("channel", "wa"), to="+15550001",
                            body={"text": ctx.payload.get("text", "hi")},
                            dedupe_key=ctx.payload["key"])
            if ctx.payload.get("fail") == "retry":
                raise RuntimeError("failed after replying")
            if ctx.payload.get("fail") == "dead":
                raise NonRetryable("failed after replying")

        return make_registry(HandlerSpec("test:reply", handler))


async def outbox_row(store: JobStore, key: str) -> OutboxMessage | None:
    for row in await store.list_outbox(OutboxFilter(limit=500)):
        if row.dedupe_key == key:
            return row
    return None


async def wait_row(store: JobStore, key: str, status: OutboxStatus,
                   timeout_s: float = 10.0) -> OutboxMessage:
    async def probe() -> OutboxMessage | None:
        row = await outbox_row(store, key)
        return row if row is not None and row.status is status else None

    return await wait_until(probe, timeout_s=timeout_s, what=f"outbox row {key} {status}")


@pytest.mark.parametrize("with_redis", [False, True], ids=["polling", "streams"])
async def test_five_500s_then_200_is_delivered_once_and_the_job_ran_once(
    backend_url: str, redis_url: str, receiver: WebhookReceiver,
    with_redis: bool,
) -> None:
    receiver.script = [Answer(500) for _ in range(5)]
    replier = Replier()
    # A long poll: the first delivery must come from the completion's wake-up, the retries
    # from the sender's own retry timer.
    settings = outbox_settings(backend_url, receiver, outbox_poll_s=30.0,
                               redis_url=redis_url if with_redis else "")
    async with started_worker(settings, registry=replier.registry()) as run:
        started = trio.current_time()
        job = await run.worker.client.enqueue("test:reply", {"key": "msg-1:reply",
                                                             "text": "héllo"}, tenant_id="acme")
        sent = await wait_row(run.worker.store, "msg-1:reply", OutboxStatus.SENT)
        elapsed = trio.current_time() - started
        done = await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)

    assert replier.runs == [job.id] and done.attempts == 1  # the outage never re-ran the job
    got = receiver.snapshot()
    assert [r.status for r in got] == [500] * 5 + [200]
    assert {r.key for r in got} == {"msg-1:reply"}  # the same Idempotency-Key every time
    assert all(r.signature_ok for r in got)
    assert list(receiver.accepted) == ["msg-1:reply"]  # exactly once, as the receiver sees it
    assert receiver.accepted["msg-1:reply"] == {
        "id": sent.id, "tenant_id": "acme", "channel": "wa", "recipient": "+15550001",
        "body": {"text": "héllo"}, "dedupe_key": "msg-1:reply", "job_id": job.id}
    assert (sent.attempts, sent.provider_message_id, sent.error_class) == (6, "pm-1", None)
    assert elapsed < 10.0


async def test_429_waits_for_retry_after(
    sqlite_url: str, receiver: WebhookReceiver
) -> None:
    receiver.script = [Answer(429, {"Retry-After": "1"})]
    replier = Replier()
    async with started_worker(outbox_settings(sqlite_url, receiver),
                              registry=replier.registry()) as run:
        await run.worker.client.enqueue("test:reply", {"key": "k429"})
        await wait_row(run.worker.store, "k429", OutboxStatus.SENT)
    first, second = receiver.snapshot()
    assert (first.status, second.status) == (429, 200)
    # The channel's own backoff is at most 0.05 s: only Retry-After explains the wait.
    assert second.at - first.at >= 0.95


async def test_4xx_is_dead_until_an_operator_retries_it(
    pg_clean: str, receiver: WebhookReceiver
) -> None:
    receiver.script = [Answer(404)]
    replier = Replier()
    settings = outbox_settings(pg_clean, receiver, admin_listen="127.0.0.1:0", admin_token=TOKEN)
    async with started_worker(settings, registry=replier.registry()) as run:
        await run.worker.client.enqueue("test:reply", {"key": "k404"})
        dead = await wait_row(run.worker.store, "k404", OutboxStatus.DEAD)
        assert (dead.error_class, dead.attempts) == ("http_404", 1)
        base = run.worker.admin_address
        assert base is not None
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=base) as admin:
            assert (await admin.get("/v1/outbox")).status_code == 401
            listed = (await admin.get("/v1/outbox", params={"status": "dead"},
                                      headers=auth)).json()
            assert [m["id"] for m in listed["messages"]] == [dead.id]
            one = await admin.get(f"/v1/outbox/{dead.id}", headers=auth)
            assert one.json()["error_class"] == "http_404"
            refused = await admin.post(f"/v1/outbox/{dead.id}/retry")
            assert refused.status_code == 401
            answer = await admin.post(f"/v1/outbox/{dead.id}/retry", headers=auth)
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] in {"pending", "sending", "sent"}
            sent = await wait_row(run.worker.store, "k404", OutboxStatus.SENT)
            again = await admin.post(f"/v1/outbox/{dead.id}/retry",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
            assert again.status_code == 409
            metrics = (await admin.get("/metrics", headers=auth)).text
    assert [r.status for r in receiver.snapshot()] == [404, 200]
    assert replier.runs == [dead.job_id]
    assert sent.attempts == 1
    assert 'gochatd_outbox_failed_total{channel="wa",error_class="http_404"} 1.0' in metrics
    assert 'gochatd_outbox_sent_total{channel="wa"} 1.0' in metrics
    assert "gochatd_outbox_delivery_latency_seconds_count" in metrics
    assert SECRET not in metrics and receiver.url not in metrics


async def test_failed_jobs_write_no_replies(
    backend_url: str, receiver: WebhookReceiver
) -> None:
    replier = Replier()
    async with started_worker(outbox_settings(backend_url, receiver),
                              registry=replier.registry()) as run:
        client = run.worker.client
        retried = await client.enqueue("test:reply", {"key": "k-retry", "fail": "retry"},
                                       max_attempts=2)
        dead = await client.enqueue("test:reply", {"key": "k-dead", "fail": "dead"})
        await wait_for_status(run.worker.store, retried.id, JobStatus.DEAD)
        await wait_for_status(run.worker.store, dead.id, JobStatus.DEAD)
        # A completing job afterwards is delivered: the sender was running all along.
        await client.enqueue("test:reply", {"key": "k-ok"})
        await wait_row(run.worker.store, "k-ok", OutboxStatus.SENT)
        rows = await run.worker.store.list_outbox(OutboxFilter())
    assert [r.dedupe_key for r in rows] == ["k-ok"]
    assert receiver.keys() == ["k-ok"]
    assert sorted(replier.runs) == sorted([retried.id, retried.id, dead.id, rows[0].job_id])


async def test_invalid_reply_makes_the_job_dead_with_a_clear_error(
    sqlite_url: str, receiver: WebhookReceiver
) -> None:
    async def handler(ctx: JobContext) -> None:
        await ctx.reply(channel="wa", to="x", body={"when": object()}, dedupe_key="k")

    registry = make_registry(HandlerSpec("test:bad_reply", handler))
    async with started_worker(outbox_settings(sqlite_url, receiver), registry=registry) as run:
        job = await run.worker.client.enqueue("test:bad_reply", {})
        dead = await wait_for_status(run.worker.store, job.id, JobStatus.DEAD)
    assert dead.attempts == 1 and dead.error_class == "non_retryable"
    assert dead.last_error is not None and "not JSON-serialisable" in dead.last_error


async def test_stop_mid_delivery_is_prompt_and_the_next_worker_redelivers(
    pg_clean: str, receiver: WebhookReceiver
) -> None:
    """A delivery in flight does not hold up a graceful stop: it is cancelled with the root
    nursery, its row stays ``sending``, and after the lease another worker delivers it with
    the same Idempotency-Key."""
    replier = Replier()
    settings = outbox_settings(pg_clean, receiver, outbox_lease_s=1.0,
                               worker_shutdown_grace_s=0.5)
    receiver.hold()
    async with started_worker(settings, registry=replier.registry()) as run:
        await run.worker.client.enqueue("test:reply", {"key": "k-stop"})

        async def arrived() -> bool:
            return receiver.arrived >= 1

        await wait_until(arrived, what="the delivery to reach the receiver")
        stop_started = trio.current_time()
        assert await run.stop(timeout_s=10) == 0
        assert trio.current_time() - stop_started < 5.0
    async with opened_store(pg_clean) as store:
        row = await outbox_row(store, "k-stop")
    assert row is not None and row.status is OutboxStatus.SENDING
    receiver.release()
    async with started_worker(settings, registry=replier.registry()) as run:
        sent = await wait_row(run.worker.store, "k-stop", OutboxStatus.SENT)
    assert sent.attempts == 2
    assert set(receiver.keys()) == {"k-stop"} and list(receiver.accepted) == ["k-stop"]
    assert len(replier.runs) == 1
