"""Outbox contract (every backend): replies are written only with a completion that
applies, in its transaction; the sender's claim, lease and fenced writes; the reaper; the
operator's retry; listing and stats."""

from __future__ import annotations

from typing import Any

import trio

from gochatd.model import Finish, Outcome, Reply
from gochatd.outbox.model import OutboxFilter, OutboxMessage, OutboxStatus
from gochatd.store import JobStore
from tests.contract.helpers import claim_one, enqueue, finish, second_store
from tests.support.wait import wait_until

SHORT_LEASE_S = 0.3


def reply(key: str, channel: str = "wa", body: dict[str, Any] | None = None) -> Reply:
    return Reply(channel=channel, recipient=f"to-{key}", body=body or {"text": key},
                 dedupe_key=key)


async def outbox_rows(store: JobStore, **kwargs: Any) -> list[OutboxMessage]:
    return await store.list_outbox(OutboxFilter(limit=500, **kwargs))


async def complete_with_replies(store: JobStore, *replies: Reply, tenant: str = "default") -> int:
    job = await enqueue(store, tenant_id=tenant)
    claimed = await claim_one(store, job, "w1")
    done = finish(claimed, Outcome.COMPLETED, replies=replies)
    assert await store.finish_jobs([done]) == {job.id}
    return job.id


# -- written with the completion -------------------------------------------------------------


async def test_completion_writes_its_replies_with_the_jobs_tenant(store: JobStore) -> None:
    body = {"text": "héllo", "n": [1, 2, {"deep": True}]}
    job_id = await complete_with_replies(
        store, reply("k1", body=body), reply("k2", channel="sms"), tenant="acme"
    )
    rows = await outbox_rows(store)
    assert [(r.dedupe_key, r.channel, r.recipient) for r in rows] == [
        ("k1", "wa", "to-k1"), ("k2", "sms", "to-k2")]
    first = rows[0]
    assert first.body == body
    assert (first.tenant_id, first.job_id, first.status, first.attempts) == (
        "acme", job_id, OutboxStatus.PENDING, 0)
    assert first.lease_owner is None and first.sent_at is None and first.error_class is None
    assert await store.get_outbox(first.id) == first


async def test_dedupe_key_is_unique_per_tenant(store: JobStore) -> None:
    # The same key twice in one completion, then again from another job of that tenant.
    await complete_with_replies(store, reply("same"), reply("same", body={"text": "second"}))
    await complete_with_replies(store, reply("same", body={"text": "third"}))
    await complete_with_replies(store, reply("same"), tenant="other")
    rows = await outbox_rows(store)
    assert sorted((r.tenant_id, r.body["text"]) for r in rows) == [
        ("default", "same"), ("other", "same")]


async def test_stale_fence_writes_no_replies(store: JobStore) -> None:
    job = await enqueue(store)
    old = await claim_one(store, job, "w-old", lease_s=SHORT_LEASE_S)

    async def reaped() -> bool:
        return bool((await store.reap_expired_leases()).retried)

    await wait_until(reaped, timeout_s=5, what="the expired lease to be reaped")
    new = await claim_one(store, await store.get_job(job.id), "w-new")  # type: ignore[arg-type]
    stale = finish(old, Outcome.COMPLETED, replies=(reply("from-stale"),))
    assert await store.finish_jobs([stale]) == set()
    assert await outbox_rows(store) == []
    # The current owner's completion writes its own.
    assert await store.finish_jobs([finish(new, Outcome.COMPLETED, replies=(reply("ok"),))]) \
        == {job.id}
    assert [r.dedupe_key for r in await outbox_rows(store)] == ["ok"]


async def test_only_applied_completions_write_replies_in_a_mixed_batch(store: JobStore) -> None:
    good = await claim_one(store, await enqueue(store, "a"), "w1")
    wrong_owner = await claim_one(store, await enqueue(store, "b"), "w1")
    retried = await claim_one(store, await enqueue(store, "c"), "w1")
    dead = await claim_one(store, await enqueue(store, "d"), "w1")
    batch = [
        finish(good, Outcome.COMPLETED, replies=(reply("good"),)),
        Finish(job_id=wrong_owner.id, lease_owner="someone-else", fence=wrong_owner.fence,
               outcome=Outcome.COMPLETED, tenant_id=wrong_owner.job.tenant_id,
               replies=(reply("wrong-owner"),)),
        # The runner never attaches replies to these; the store must not write them anyway.
        finish(retried, Outcome.RETRY, error_class="E", replies=(reply("retried"),)),
        finish(dead, Outcome.DEAD, error_class="E", replies=(reply("dead"),)),
    ]
    assert await store.finish_jobs(batch) == {good.id, retried.id, dead.id}
    assert [r.dedupe_key for r in await outbox_rows(store)] == ["good"]


# -- the sender's side -------------------------------------------------------------------------


async def test_claim_leases_due_rows_of_the_given_channels(store: JobStore) -> None:
    await complete_with_replies(store, reply("a"), reply("b"), reply("s", channel="sms"))
    claimed = await store.claim_outbox(["wa"], 10, "sender-1", 30.0)
    assert [m.dedupe_key for m in claimed] == ["a", "b"]
    for m in claimed:
        assert (m.status, m.attempts, m.lease_owner) == (OutboxStatus.SENDING, 1, "sender-1")
        assert m.lease_expires_at is not None
        assert abs((m.lease_expires_at - m.updated_at).total_seconds() - 30.0) < 0.05
    # Nothing is claimed twice; another channel's row is left alone; limit is honoured.
    assert await store.claim_outbox(["wa"], 10, "sender-2", 30.0) == []
    assert await store.claim_outbox(["wa", "sms"], 0, "sender-2", 30.0) == []
    [sms] = await store.claim_outbox(["sms", "other"], 1, "sender-2", 30.0)
    assert sms.dedupe_key == "s"


async def test_complete_is_fenced_by_owner_and_attempt(store: JobStore) -> None:
    await complete_with_replies(store, reply("a"))
    [m] = await store.claim_outbox(["wa"], 1, "sender-1", 30.0)
    assert await store.complete_outbox(m, "sender-2", "pm-x") is None
    latency = await store.complete_outbox(m, "sender-1", "pm-1")
    assert latency is not None and 0.0 <= latency < 30.0
    got = await store.get_outbox(m.id)
    assert got is not None
    assert (got.status, got.provider_message_id, got.attempts) == (OutboxStatus.SENT, "pm-1", 1)
    assert got.sent_at is not None
    # Sent is terminal: nothing moves it again.
    assert await store.complete_outbox(m, "sender-1", "again") is None
    assert not await store.retry_outbox(m, "sender-1", 0.0, "http_500")
    assert not await store.fail_outbox(m, "sender-1", "http_400")
    assert await store.claim_outbox(["wa"], 10, "sender-1", 30.0) == []


async def test_reaped_lease_fences_out_the_old_sender(store: JobStore) -> None:
    await complete_with_replies(store, reply("a"))
    [old] = await store.claim_outbox(["wa"], 1, "sender-1", SHORT_LEASE_S)
    assert await store.reap_outbox_leases(max_attempts=25) == []  # not yet expired

    async def reaped() -> list[int]:
        return await store.reap_outbox_leases(max_attempts=25)

    assert await wait_until(reaped, timeout_s=5, what="the sending lease to expire") == [old.id]
    back = await store.get_outbox(old.id)
    assert back is not None
    assert (back.status, back.error_class, back.lease_owner) == (
        OutboxStatus.PENDING, "lease_expired", None)
    # The same owner claims it again (a new attempt): the first attempt's writes match nothing.
    [new] = await store.claim_outbox(["wa"], 1, "sender-1", 30.0)
    assert new.attempts == 2
    assert await store.complete_outbox(old, "sender-1", "late") is None
    assert not await store.retry_outbox(old, "sender-1", 0.0, "timeout")
    assert not await store.fail_outbox(old, "sender-1", "http_400")
    assert await store.complete_outbox(new, "sender-1", None) is not None


async def test_reaper_makes_exhausted_rows_dead(store: JobStore) -> None:
    await complete_with_replies(store, reply("a"))
    [m] = await store.claim_outbox(["wa"], 1, "sender-1", SHORT_LEASE_S)

    async def reaped() -> list[int]:
        return await store.reap_outbox_leases(max_attempts=1)

    assert await wait_until(reaped, timeout_s=5, what="the sending lease to expire") == [m.id]
    got = await store.get_outbox(m.id)
    assert got is not None and got.status is OutboxStatus.DEAD


async def test_retry_waits_for_its_delay_by_the_database_clock(store: JobStore) -> None:
    await complete_with_replies(store, reply("a"))
    [m] = await store.claim_outbox(["wa"], 1, "sender-1", 30.0)
    assert await store.retry_outbox(m, "sender-1", 3600.0, "http_503")
    got = await store.get_outbox(m.id)
    assert got is not None
    assert (got.status, got.error_class, got.lease_owner) == (OutboxStatus.PENDING, "http_503", None)
    assert (got.next_attempt_at - got.updated_at).total_seconds() > 3599
    assert await store.claim_outbox(["wa"], 10, "sender-1", 30.0) == []
    # A short delay comes due.
    [m2] = await complete_and_claim(store, "b")
    assert await store.retry_outbox(m2, "sender-1", 0.05, "timeout")

    async def due() -> list[OutboxMessage]:
        return await store.claim_outbox(["wa"], 10, "sender-1", 30.0)

    [again] = await wait_until(due, timeout_s=5, what="the retry to come due")
    assert (again.id, again.attempts) == (m2.id, 2)


async def complete_and_claim(store: JobStore, key: str) -> list[OutboxMessage]:
    await complete_with_replies(store, reply(key))
    return await store.claim_outbox(["wa"], 1, "sender-1", 30.0)


async def test_dead_and_operator_retry(store: JobStore) -> None:
    [m] = await complete_and_claim(store, "a")
    assert await store.fail_outbox(m, "sender-1", "http_400")
    dead = await store.get_outbox(m.id)
    assert dead is not None and (dead.status, dead.error_class) == (OutboxStatus.DEAD, "http_400")
    assert await store.claim_outbox(["wa"], 10, "sender-1", 30.0) == []
    again = await store.requeue_outbox(m.id)
    assert again is not None
    assert (again.status, again.attempts, again.lease_owner) == (OutboxStatus.PENDING, 0, None)
    assert await store.requeue_outbox(m.id) is None  # only dead rows
    assert await store.requeue_outbox(999_999) is None
    [claimed] = await store.claim_outbox(["wa"], 10, "sender-2", 30.0)
    assert (claimed.id, claimed.attempts) == (m.id, 1)


async def test_two_senders_never_claim_the_same_row(store: JobStore, backend_url: str) -> None:
    await complete_with_replies(store, *(reply(f"k{i}") for i in range(40)))
    got: list[list[OutboxMessage]] = [[], []]
    async with second_store(backend_url) as other:

        async def take(s: JobStore, slot: int) -> None:
            for _ in range(10):
                got[slot].extend(await s.claim_outbox(["wa"], 3, f"sender-{slot}", 30.0))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(take, store, 0)
            nursery.start_soon(take, other, 1)
    ids = [m.id for m in got[0] + got[1]]
    assert len(ids) == len(set(ids)) == 40


async def test_list_filters_paging_and_stats(store: JobStore) -> None:
    await complete_with_replies(store, reply("a"), reply("b", channel="sms"), tenant="t1")
    await complete_with_replies(store, reply("c"), tenant="t2")
    [m] = await store.claim_outbox(["sms"], 1, "s", 30.0)
    assert await store.fail_outbox(m, "s", "http_404")
    assert [r.dedupe_key for r in await outbox_rows(store, tenant_id="t1")] == ["a", "b"]
    assert [r.dedupe_key for r in await outbox_rows(store, channel="wa")] == ["a", "c"]
    assert [r.dedupe_key for r in await outbox_rows(store, status=OutboxStatus.DEAD)] == ["b"]
    page1 = await store.list_outbox(OutboxFilter(limit=2))
    page2 = await store.list_outbox(OutboxFilter(limit=2, after_id=page1[-1].id))
    assert [r.dedupe_key for r in page1 + page2] == ["a", "b", "c"]
    stats = await store.outbox_stats()
    assert stats.counts == {OutboxStatus.PENDING: 2, OutboxStatus.DEAD: 1}
    assert stats.oldest_pending_age_s is not None and 0.0 <= stats.oldest_pending_age_s < 30.0


async def test_a_batch_with_replies_changes_jobs_exactly_like_one_without(store: JobStore) -> None:
    """One reply in a batch sends the whole batch down the replies path (its own statement
    on PostgreSQL): every outcome must land as finish_jobs itself would write it."""

    async def run_batch(with_reply: bool) -> list[Any]:
        claimed = [await claim_one(store, await enqueue(store, f"t{i}"), "w1") for i in range(4)]
        batch = [
            finish(claimed[0], Outcome.COMPLETED,
                   replies=(reply(f"only-{with_reply}"),) if with_reply else ()),
            finish(claimed[1], Outcome.RETRY, delay_s=3600.0, error_class="E", last_error="e: x"),
            finish(claimed[2], Outcome.INTERRUPTED, error_class="interrupted", last_error="stop"),
            finish(claimed[3], Outcome.DEAD, error_class="non_retryable", last_error="nope"),
        ]
        assert await store.finish_jobs(batch) == {c.id for c in claimed}
        out = []
        for c in claimed:
            job = await store.get_job(c.id)
            assert job is not None
            delay = round((job.scheduled_at - job.updated_at).total_seconds())
            out.append((job.status, job.attempts, job.error_class, job.last_error,
                        job.completed_at is not None, job.failed_at is not None,
                        job.lease_expires_at, job.dispatched_at, max(delay, 0)))
        return out

    plain = await run_batch(False)
    with_reply = await run_batch(True)
    assert with_reply == plain
    assert [r.dedupe_key for r in await outbox_rows(store)] == ["only-True"]
