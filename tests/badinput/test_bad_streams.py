"""Bad input on the Redis Streams surface (PostgreSQL + Redis, worker in-process).

Anyone who can XADD to ``gochat:jobs:<queue>`` can hand the worker anything. Every entry is
a hint: the row decides. So, for every entry of the corpus below:

- it is acked (nothing left pending), and the malformed ones are counted, exactly;
- an entry naming a real job runs that job exactly once, as the row says (its tenant, its
  type), whatever the entry claims; duplicates do not run it twice;
- an entry naming a finished, dead, cancelled or not-yet-due job changes nothing;
- an entry naming no job writes nothing;
- canary jobs enqueued before and after the corpus complete exactly once.

Ids of the targets are only known once their rows exist, so entries are built from a
description; targets are inserted as already dispatched, so nothing but these entries can
start them (the sweep is far away).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import redis

from gochatd.context import JobContext
from gochatd.dispatch.entries import entry_from_redis as _entry
from gochatd.model import Job, JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.badinput.tally import tried
from tests.integration.helpers import (
    STREAM_GROUP,
    all_jobs,
    make_registry,
    redis_call,
    sql,
    stream_key,
    wait_all_status,
    wait_for,
    wait_for_status,
)
from tests.support.harness import make_settings, running_worker
from tests.support.wait import wait_until

RECORD = "bi:record"
MB = 1_000_000

Fields = dict[Any, Any] | list[tuple[Any, Any]]  # a list keeps repeated field names


@dataclass(eq=False)
class Recorder:
    """What each execution saw: the job as the handler got it."""

    runs: Counter[int] = field(default_factory=Counter)
    seen: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # tenant, type, queue

    async def handler(self, ctx: JobContext) -> None:
        self.runs[ctx.job_id] += 1
        self.seen[ctx.job_id] = (ctx.tenant_id, ctx.job_type, ctx.queue)


# -- the corpus ------------------------------------------------------------------------------

#: Entries that do not name a job at all: acked, counted as malformed, nothing else.
MALFORMED: dict[str, dict[Any, Any]] = {
    "no-job-id": {"job_type": RECORD, "queue": "default", "tenant_id": "default"},
    "job-id-upper-case-name": {"JOB_ID": "1"},
    "job-id-name-with-space": {"job_id ": "1"},
    "job-id-name-invalid-utf8": {b"job_id\xff": "1"},
    "exponent": {"job_id": "1e3"},
    "hex": {"job_id": "0x10"},
    "plus-sign": {"job_id": "+5"},
    "trailing-space": {"job_id": "5 "},
    "leading-tab": {"job_id": "\t5"},
    "trailing-newline": {"job_id": "5\n"},
    "underscore-digits": {"job_id": "1_000"},
    "decimal": {"job_id": "5.0"},
    "nan": {"job_id": "NaN"},
    "infinity": {"job_id": "Infinity"},
    "json-null": {"job_id": "null"},
    "json-array": {"job_id": "[5]"},
    "json-object": {"job_id": '{"id": 5}'},
    "word": {"job_id": "five"},
    "negative": {"job_id": "-1"},
    "negative-zero": {"job_id": "-0"},
    "zero": {"job_id": "0"},
    "zeros": {"job_id": "000000000000000000"},
    "arabic-indic-digits": {"job_id": "\u0663"},
    "fullwidth-digit": {"job_id": "\uff15"},
    "superscript-two": {"job_id": "\u00b2"},
    "math-bold-one": {"job_id": "\U0001d7cf"},
    "nko-digit": {"job_id": "\u07c1"},
    "bengali-zero": {"job_id": "\u09e6"},
    "bigint-overflow": {"job_id": "9223372036854775808"},
    "thousand-digits": {"job_id": "9" * 1000},
    "one-megabyte-id": {"job_id": "1" * MB},
    "invalid-utf8": {"job_id": b"\xff"},
    "digit-then-invalid-utf8": {"job_id": b"5\xff"},
    "nul": {"job_id": b"\x00"},
    "digit-then-nul": {"job_id": b"5\x00"},
    "overlong-utf8-five": {"job_id": b"\xc0\xb5"},
    "empty-name-and-value": {"": ""},
    "binary-name-and-value": {b"\x80\x81": b"\x00\xff", b"\xfe": b"\xfe"},
    "thousand-fields-no-id": {f"f{i}": str(i) for i in range(1000)},
    # Only the first 16 fields of an entry are read: a job_id after them is not seen.
    "job-id-after-100-fields": {**{f"pad{i}": "x" for i in range(100)}, "job_id": "1"},
}

#: Well-formed references to nothing: acked, not malformed, nothing written.
NO_SUCH_JOB: dict[str, dict[Any, Any]] = {
    "eighteen-nines": {"job_id": "999999999999999999"},
    "bigint-max": {"job_id": "9223372036854775807"},
    "far-beyond-last-row": {"job_id": "{beyond}"},
    "beyond-with-junk": {"job_id": "{beyond1}", "job_type": "x" * 300, "queue": "no queue!",
                         "tenant_id": b"\xff" * 300},
}


@dataclass(frozen=True)
class Target:
    """A real row and the hostile entries that name it (``{id}`` is its id)."""

    name: str
    entries: list[Fields]
    stream_queue: str = "default"  # which stream the entries go to
    tenant: str = "default"
    queue: str = "default"
    job_type: str = RECORD
    runs: int = 1  # executions expected


def _many(n: int, fields: Fields) -> list[Fields]:
    return [dict(fields) for _ in range(n)]


TARGETS: list[Target] = [
    Target("foreign-tenant", [{"job_id": "{id}", "job_type": RECORD, "queue": "default",
                               "tenant_id": "evil-corp"}], tenant="acme"),
    Target("type-mismatch", [{"job_id": "{id}", "job_type": "sys:fail", "queue": "default",
                              "tenant_id": "default"}]),
    Target("only-job-id", [{"job_id": "{id}"}]),
    Target("leading-zeros", [{"job_id": "0{id}"}]),
    Target("one-megabyte-fields", [{"job_id": "{id}", "job_type": "t" * MB, "queue": "q" * MB,
                                    "tenant_id": "x" * MB}], tenant="big"),
    Target("binary-fields", [{"job_id": "{id}", "job_type": b"\xff\xfe", "tenant_id": b"\x00\x80",
                              b"\xff": b"\xfe"}]),
    Target("job-id-first-of-999-fields",
           [{"job_id": "{id}", **{f"junk{i}": "x" * 10 for i in range(998)}}]),
    Target("twenty-duplicates", _many(20, {"job_id": "{id}", "job_type": RECORD})),
    Target("duplicates-on-another-stream", _many(3, {"job_id": "{id}"}), stream_queue="high"),
    Target("entry-on-another-queues-stream", [{"job_id": "{id}", "queue": "high"}],
           stream_queue="high", queue="low"),
    Target("job-id-twice-in-one-entry", [[("job_id", "abc"), ("job_id", "{id}")]]),
]

#: Rows that must come out of the corpus unchanged, and the entries aimed at them.
UNTOUCHABLE_ENTRIES = 3


def _fill(fields: Any, values: dict[str, int]) -> Any:
    def one(value: Any) -> Any:
        if isinstance(value, str) and "{" in value:
            for key, number in values.items():
                value = value.replace("{" + key + "}", str(number))
        return value

    if isinstance(fields, list):
        return [(k, one(v)) for k, v in fields]
    return {k: one(v) for k, v in fields.items()}


def _xadd_raw(r: redis.Redis, key: str, fields: Any) -> None:
    """XADD keeping repeated field names (redis-py's dict form cannot)."""
    flat: list[Any] = []
    for k, v in fields if isinstance(fields, list) else fields.items():
        flat += [k, v]
    r.execute_command("XADD", key, "*", *flat)  # type: ignore[no-untyped-call]


async def _insert(url: str, *, tenant: str = "default", queue: str = "default",
                  job_type: str = RECORD, status: str = "queued", delay_s: float = 0.0) -> int:
    """A foreign producer's row, already marked dispatched: only an entry can start it."""
    rows = await sql(
        url,
        "INSERT INTO background_jobs (tenant_id, job_type, queue, status, scheduled_at, "
        "dispatched_at) VALUES (%s, %s, %s, %s, now() + make_interval(secs => %s), now()) "
        "RETURNING id",
        (tenant, job_type, queue, status, delay_s),
    )
    return int(rows[0][0])


async def _stream_settled(url: str, keys: list[str]) -> bool:
    """Every entry of ``keys`` delivered to the group and acked."""

    def probe(r: redis.Redis) -> bool:
        for key in keys:
            groups = r.xinfo_groups(key)
            group = next((g for g in groups if g["name"] == STREAM_GROUP.encode()), None)
            if group is None or group["lag"] != 0 or group["pending"] != 0:
                return False
            if int(r.xpending(key, STREAM_GROUP)["pending"]) != 0:
                return False
        return True

    return await redis_call(url, probe)


def _snapshot(jobs: list[Job], ids: set[int]) -> dict[int, dict[str, Any]]:
    return {j.id: j.to_dict() for j in jobs if j.id in ids}


async def test_hostile_stream_entries(pg_clean: str, redis_url: str) -> None:
    recorder = Recorder()
    registry = make_registry(HandlerSpec(RECORD, recorder.handler))
    # The sweep never runs during the test: stream entries are the only way in.
    settings = make_settings(pg_clean, redis_url, worker_redis_sweep_interval_s=600.0)
    async with running_worker(settings, registry=registry) as worker:
        await wait_for(lambda: worker.mode.value == "streams", what="streams mode")
        store = worker.store
        canary_before = await worker.client.enqueue(RECORD, {"canary": "before"})
        await wait_for_status(store, canary_before.id, JobStatus.COMPLETED)

        targets = {t.name: await _insert(pg_clean, tenant=t.tenant, queue=t.queue,
                                         job_type=t.job_type) for t in TARGETS}
        delayed = await _insert(pg_clean, delay_s=3600.0)
        dead = await _insert(pg_clean, status="dead")
        cancelled = await _insert(pg_clean, status="cancelled")
        untouchable = {canary_before.id, delayed, dead, cancelled}
        before_jobs = await all_jobs(store)
        frozen = _snapshot(before_jobs, untouchable)
        last_id = max(j.id for j in before_jobs)

        values = {"beyond": last_id + 10_000_000, "beyond1": last_id + 10_000_001}
        entries: list[tuple[str, Any]] = []
        for hostile in [*MALFORMED.values(), *NO_SUCH_JOB.values()]:
            entries.append((stream_key(), _fill(hostile, values)))
        for target in TARGETS:
            for aimed in target.entries:
                entries.append((stream_key(target.stream_queue),
                                _fill(aimed, {"id": targets[target.name]})))
        for job_id in sorted(untouchable):
            entries += [(stream_key(), {"job_id": str(job_id), "job_type": RECORD})] * UNTOUCHABLE_ENTRIES

        def xadd_all(r: redis.Redis) -> None:
            for key, fields in entries:
                _xadd_raw(r, key, fields)

        await redis_call(redis_url, xadd_all)
        tried("streams", len(entries))
        canary_after = await worker.client.enqueue(RECORD, {"canary": "after"})

        runnable = [*targets.values(), canary_after.id]
        done = await wait_all_status(store, runnable, JobStatus.COMPLETED, timeout_s=20)
        keys = sorted({key for key, _ in entries})
        await wait_until(lambda: _stream_settled(redis_url, keys), timeout_s=20,
                         what="every entry delivered and acked")
        await wait_for(lambda: worker.counters["malformed_stream_entries"] == len(MALFORMED),
                       what=f"{len(MALFORMED)} malformed entries counted")
        after_jobs = await all_jobs(store)
        counters = dict(worker.counters)
        mode = worker.mode.value

    # Exactly the malformed entries were counted as malformed, and the worker never left
    # streams mode or saw an error of its own.
    assert counters["malformed_stream_entries"] == len(MALFORMED), counters
    assert mode == "streams"
    assert counters.get("redis_errors", 0) == 0 and counters.get("store_errors", 0) == 0, counters
    # Every target ran once, as its row says.
    for target in TARGETS:
        job_id = targets[target.name]
        assert recorder.runs[job_id] == target.runs, (target.name, recorder.runs[job_id])
        assert recorder.seen[job_id] == (target.tenant, target.job_type, target.queue), target.name
        assert done[job_id].attempts == 1 and done[job_id].fence == 1, target.name
    # The canaries ran once each; nothing else ran.
    assert recorder.runs[canary_before.id] == 1 and recorder.runs[canary_after.id] == 1
    assert set(recorder.runs) == {*targets.values(), canary_before.id, canary_after.id}
    # Finished, dead, cancelled and not-yet-due jobs are exactly as they were.
    assert _snapshot(after_jobs, untouchable) == frozen
    # No entry created a row.
    assert len(after_jobs) == len(before_jobs) + 1  # + canary_after


async def test_stream_key_of_the_wrong_type_is_survived(
    pg_clean: str, redis_url: str
) -> None:
    """Someone SETs a string (or a list) where a queue's stream lives: jobs still run."""
    settings = make_settings(pg_clean, redis_url)
    async with running_worker(settings, registry=make_registry()) as worker:
        canary_before = await worker.client.enqueue("sys:noop", {})
        await wait_for_status(worker.store, canary_before.id, JobStatus.COMPLETED)

        def clobber(r: redis.Redis) -> None:
            with r.pipeline(transaction=True) as tx:  # the worker recreates deleted streams
                tx.delete(stream_key("purgable"), stream_key("low"))
                tx.set(stream_key("purgable"), "not a stream")
                tx.lpush(stream_key("low"), "not a stream either")
                tx.execute()

        await redis_call(redis_url, clobber)
        tried("streams", 2)
        ids = [(await worker.client.enqueue("sys:noop", {"n": i}, queue=q)).id
               for i, q in enumerate(["default", "high", "low", "purgable"])]
        await wait_all_status(worker.store, ids, JobStatus.COMPLETED, timeout_s=15)
        counters = dict(worker.counters)

    assert counters.get("finished_completed", 0) == 5, counters


def test_malformed_table_is_malformed() -> None:
    """Guards the table above: every entry in MALFORMED really names no job."""
    for name, fields in MALFORMED.items():
        flat = [x if isinstance(x, bytes) else str(x).encode() for kv in fields.items() for x in kv]
        assert _entry(b"s", b"1-0", flat).parse() is None, name
