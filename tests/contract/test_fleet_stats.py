"""JobStore contract: the fleet dashboard's tables (migration 0012) and listings. Per-minute
finish counters add up across flushes and daemons (one upsert each) in the current minute of
the database clock, read back per key and pruned by age; each daemon's row is upserted,
listed with its heartbeat's age, carries an operator's request that only a matching
compare-and-set clears, and is removed or pruned. Listings page newest or oldest first,
search ids, types, tenants and payload text with ``%`` and ``_`` literal, list the
scheduled jobs soonest first, and count them apart. Every backend, plain and routed."""

from __future__ import annotations

import pytest

from gochatd.model import JobFilter, JobStatus, Outcome
from gochatd.store import JobStore, search
from gochatd.store.fleet import DaemonBeat, DaemonRequest, FinishCounts
from tests.contract.helpers import claim_one, enqueue, finish, is_postgres, raw_sql, second_store


def _beat(daemon_id: str = "w1", **changes: object) -> DaemonBeat:
    values: dict[str, object] = dict(id=daemon_id, host="h1", pid=42, mode="polling",
                                     version="9.9", concurrency=8, in_flight=3, paused=False,
                                     draining=False)
    values.update(changes)
    return DaemonBeat(**values)  # type: ignore[arg-type]


def _ago(url: str, column: str, seconds: int) -> str:
    """SQL for the database's now minus ``seconds`` (a column's value ``seconds`` ago)."""
    if is_postgres(url):
        return f"now() - make_interval(secs => {seconds})"
    return f"((julianday('now') - 2440587.5) * 86400.0) - {seconds}"


# -- per-minute counters -----------------------------------------------------------------


async def test_counts_add_up_across_flushes_and_daemons(store: JobStore, backend_url: str) -> None:
    assert await store.job_counts(60, None) == []
    await store.add_job_counts([])  # nothing to write
    await store.add_job_counts([FinishCounts("mail", "mail:send", 3, 1, 2),
                                FinishCounts("bulk", "report:make", 1, 0, 0)])
    async with second_store(backend_url) as other:  # another daemon, the same rows
        await other.add_job_counts([FinishCounts("mail", "mail:send", 2, 0, 1)])
    now = await store.database_now()
    rows = await store.job_counts(60, None)  # one minute (two if the flushes straddled one)
    assert 1 <= len(rows) <= 2 and {r.key for r in rows} == {"all"}
    assert (sum(r.completed for r in rows), sum(r.failed for r in rows),
            sum(r.retried for r in rows)) == (6, 1, 3)
    for row in rows:
        assert row.minute.second == 0 and row.minute.microsecond == 0
        assert 0 <= (now - row.minute).total_seconds() < 120
    by_queue: dict[str, list[int]] = {}
    for r in await store.job_counts(60, "queue"):
        sums = by_queue.setdefault(r.key, [0, 0, 0])
        sums[0], sums[1], sums[2] = sums[0] + r.completed, sums[1] + r.failed, sums[2] + r.retried
    assert by_queue == {"mail": [5, 1, 3], "bulk": [1, 0, 0]}
    by_type = {r.key for r in await store.job_counts(5, "job_type")}
    assert by_type == {"mail:send", "report:make"}
    stored = await raw_sql(backend_url, "SELECT count(*) FROM gochatd_job_counts")
    assert stored[0][0] in (2, 3)  # one row per (minute, queue, job type): the upsert added


async def test_counts_outside_the_window_are_left_out_and_pruned(
    store: JobStore, backend_url: str
) -> None:
    await raw_sql(backend_url, "INSERT INTO gochatd_job_counts (minute, queue, job_type, completed)"
                  f" VALUES ({_ago(backend_url, 'minute', 3 * 86400)}, 'q', 't', 7)")
    await raw_sql(backend_url, "INSERT INTO gochatd_job_counts (minute, queue, job_type, completed)"
                  f" VALUES ({_ago(backend_url, 'minute', 3 * 3600)}, 'q', 't', 5)")
    await store.add_job_counts([FinishCounts("q", "t", completed=1)])
    assert [r.completed for r in await store.job_counts(60, None)] == [1]
    assert sorted(r.completed for r in await store.job_counts(1440, None)) == [1, 5]
    assert await store.prune_job_counts(2 * 86400, 100) == 1
    assert await store.prune_job_counts(2 * 86400, 100) == 0
    assert sorted(r.completed for r in await store.job_counts(1440, None)) == [1, 5]


# -- the daemons' rows -------------------------------------------------------------------


async def test_a_daemon_row_is_upserted_listed_and_removed(store: JobStore) -> None:
    assert await store.list_daemons() == []
    assert await store.upsert_daemon(_beat()) is None
    assert await store.upsert_daemon(_beat("w2", mode="paused", paused=True)) is None
    assert await store.upsert_daemon(_beat(in_flight=5)) is None  # the same daemon again
    rows = await store.list_daemons()
    assert [r.beat for r in rows] == [_beat(in_flight=5), _beat("w2", mode="paused", paused=True)]
    first = rows[0]
    assert first.requested is None
    assert 0 <= first.heartbeat_age_s < 5
    assert first.started_at <= first.last_heartbeat
    assert await store.remove_daemon("w1")
    assert not await store.remove_daemon("w1")
    assert [r.beat.id for r in await store.list_daemons()] == ["w2"]


async def test_a_restart_under_the_same_id_starts_again(store: JobStore, backend_url: str) -> None:
    await store.upsert_daemon(_beat())
    await raw_sql(backend_url, "UPDATE gochatd_daemons SET started_at = "
                  f"{_ago(backend_url, 'started_at', 600)}")
    await store.upsert_daemon(_beat())
    [same] = await store.list_daemons()
    assert (same.last_heartbeat - same.started_at).total_seconds() > 500
    await store.upsert_daemon(_beat(pid=43))
    [again] = await store.list_daemons()
    assert (again.last_heartbeat - again.started_at).total_seconds() < 5


async def test_a_request_is_cleared_only_by_its_own_sequence(store: JobStore) -> None:
    assert not await store.request_daemon("nobody", "drain")
    await store.upsert_daemon(_beat())
    assert await store.request_daemon("w1", "pause")
    pending = await store.upsert_daemon(_beat())
    assert pending is not None and pending.action == "pause"
    assert [r.requested for r in await store.list_daemons()] == ["pause"]
    assert await store.request_daemon("w1", "resume")  # a newer one replaces it
    assert not await store.clear_daemon_request("w1", pending.seq)  # stale: kept
    newer = await store.upsert_daemon(_beat())
    assert newer == DaemonRequest("resume", pending.seq + 1)
    assert await store.clear_daemon_request("w1", newer.seq)
    assert not await store.clear_daemon_request("w1", newer.seq)  # once
    assert await store.upsert_daemon(_beat()) is None


async def test_dead_daemons_rows_are_pruned(store: JobStore, backend_url: str) -> None:
    await store.upsert_daemon(_beat())
    await store.upsert_daemon(_beat("w2"))
    await raw_sql(backend_url, "UPDATE gochatd_daemons SET last_heartbeat = "
                  f"{_ago(backend_url, 'last_heartbeat', 7200)} WHERE id = 'w2'")
    [old] = [r for r in await store.list_daemons() if r.beat.id == "w2"]
    assert old.heartbeat_age_s > 7000
    assert await store.prune_daemons(3600) == 1
    assert [r.beat.id for r in await store.list_daemons()] == ["w1"]


# -- listings and counts -----------------------------------------------------------------


async def test_newest_first_pages_back_with_the_cursor(store: JobStore) -> None:
    ids = [(await enqueue(store, f"t:{i}")).id for i in range(5)]
    page = await store.list_jobs(JobFilter(limit=2, newest_first=True))
    assert [j.id for j in page] == ids[:-3:-1]
    page = await store.list_jobs(JobFilter(limit=2, newest_first=True, after_id=page[-1].id))
    assert [j.id for j in page] == [ids[2], ids[1]]
    page = await store.list_jobs(JobFilter(limit=2, newest_first=True, after_id=ids[1]))
    assert [j.id for j in page] == [ids[0]]
    assert [j.id for j in await store.list_jobs(JobFilter(limit=10))] == ids  # oldest first


async def test_search_matches_ids_types_tenants_and_payload_text(store: JobStore) -> None:
    mail = await enqueue(store, "mail:welcome", payload={"to": "Ada@example.org"})
    report = await enqueue(store, "report:monthly", tenant_id="acme-corp", payload={"n": 1})
    odd = await enqueue(store, "odd:job", payload={"note": "100% off_sale"})
    plain = await enqueue(store, "odd:job", payload={"note": "1000 offxsale"})

    async def found(text: str, **kw: object) -> list[int]:
        jobs = await store.list_jobs(JobFilter(search=text, limit=50, **kw))  # type: ignore[arg-type]
        return sorted(j.id for j in jobs)

    assert await found("welcome") == [mail.id]
    assert await found("ACME") == [report.id]  # case-insensitive
    assert await found("ada@example") == [mail.id]  # the payload's text
    assert await found("0% off") == [odd.id]  # % is literal, not "anything"
    assert await found("f_s") == [odd.id]  # _ is literal, not one character
    assert await found(str(report.id)) == sorted({report.id} | {
        j.id for j in (mail, report, odd, plain) if str(report.id) in str(j.id)})
    assert await found("odd:", newest_first=True) == [odd.id, plain.id]
    assert await found("odd:", status=JobStatus.RUNNING) == []
    assert await found("nothing-like-this") == []


async def test_scheduled_jobs_soonest_first_and_counted_apart(store: JobStore) -> None:
    due = await enqueue(store, "t:due")
    late = await enqueue(store, "t:late", delay_s=3600)
    soon = await enqueue(store, "t:soon", delay_s=600)
    later = await enqueue(store, "t:later", delay_s=7200)
    page = await store.list_jobs(JobFilter(scheduled=True, limit=2))
    assert [j.id for j in page] == [soon.id, late.id]
    page = await store.list_jobs(JobFilter(scheduled=True, limit=2, after_id=page[-1].id))
    assert [j.id for j in page] == [later.id]
    assert due.id not in [j.id for j in await store.list_jobs(JobFilter(scheduled=True))]
    assert await store.count_scheduled_jobs() == 3
    assert await store.count_delayed_jobs() == 3
    counts = await store.count_jobs_by_status()
    assert counts == {JobStatus.QUEUED: 4}  # each job once, in its status
    # A retry waiting for its next attempt is scheduled, but not delayed (it is retrying).
    failing = await enqueue(store, "t:failing")
    claimed = await claim_one(store, failing, "w1")
    assert await store.finish_jobs([finish(claimed, Outcome.RETRY, delay_s=3600)]) == {failing.id}
    assert await store.count_scheduled_jobs() == 4
    assert await store.count_delayed_jobs() == 3


async def test_a_search_is_bounded_to_the_newest_jobs_but_finds_any_id(
    store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SEARCH_WINDOW", 3)
    old = await enqueue(store, "needle:old")
    for i in range(4):
        await enqueue(store, f"hay:{i}")
    new = await enqueue(store, "needle:new")

    async def found(text: str, **kw: object) -> list[int]:
        args: dict[str, object] = {"limit": 10, **kw}
        jobs = await store.list_jobs(JobFilter(search=text, **args))  # type: ignore[arg-type]
        return [j.id for j in jobs]

    assert await found("needle") == [new.id]  # the old one is past the window
    assert await found(str(old.id)) == [old.id]  # an id is found anywhere
    assert await found(str(old.id), newest_first=True, limit=1) == [old.id]
    assert await found(str(old.id), status=JobStatus.DEAD) == []
    assert await found(str(old.id), after_id=old.id) == []
