"""Bad input through the wire contract: rows written by foreign SQL (the Go API, a psql
session), on PostgreSQL (with Redis Streams dispatch) and SQLite (polling).

Each case is one INSERT. Either the database refuses it (nothing written), or gochatd must
cope with the row it got: run it once, make it dead with a reason, or leave it alone when it
is not claimable — and in every case keep running every other job. A canary job is run
before the corpus, and another inserted after it must still start within a second.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

import pytest

from gochatd.context import JobContext
from gochatd.model import Job, JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.badinput.tally import tried
from tests.integration.helpers import (
    all_jobs,
    is_postgres,
    make_registry,
    seconds,
    sql,
    wait_for_status,
)
from tests.support.harness import make_settings, running_worker
from tests.support.wait import wait_until

RECORD = "bi:record"


class Expect(enum.Enum):
    REJECTED = "rejected"  # the database refuses the INSERT
    RUNS = "runs"  # claimed and run exactly once, completed
    DEAD = "dead"  # claimed and made dead without running the handler
    FAILS = "fails"  # run once, its handler fails, dead (no retry loop)
    LEFT_ALONE = "left alone"  # accepted, never claimed: the row stays exactly as inserted


@dataclass(frozen=True)
class SqlCase:
    name: str
    #: column -> SQL expression, or (PostgreSQL expression, SQLite expression)
    columns: dict[str, str | tuple[str, str]]
    expect: Expect | tuple[Expect, Expect]
    error_class: str | None = None  # for DEAD / FAILS

    def sql(self, postgres: bool) -> str:
        cols = {"job_type": f"'{RECORD}'", **self.columns}
        exprs = [v if isinstance(v, str) else v[0 if postgres else 1] for v in cols.values()]
        return (f"INSERT INTO background_jobs ({', '.join(cols)}) VALUES ({', '.join(exprs)}) "
                "RETURNING id")

    def expected(self, postgres: bool) -> Expect:
        return self.expect if isinstance(self.expect, Expect) else self.expect[0 if postgres else 1]


def q(text: str) -> str:
    """An SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


R, RUNS, DEAD, FAILS, ALONE = (Expect.REJECTED, Expect.RUNS, Expect.DEAD, Expect.FAILS,
                               Expect.LEFT_ALONE)
DEEP = '{"a":' * 3000 + "1" + "}" * 3000
HUGE_INT = '{"n": ' + "7" * 5000 + "}"
NOW_MINUS_HOUR = ("now() - interval '1 hour'",
                  "((julianday('now') - 2440587.5) * 86400.0) - 3600.0")

CASES: list[SqlCase] = [
    # job_type
    # A type no daemon has a handler for is never claimed: it waits (docs/job-types.md).
    SqlCase("unknown-type", {"job_type": q("bi:no-such-handler")}, ALONE),
    SqlCase("type-200-chars-of-junk", {"job_type": q("a b!" * 50)}, ALONE),
    SqlCase("type-empty", {"job_type": "''"}, R),
    SqlCase("type-null", {"job_type": "NULL"}, R),
    SqlCase("type-201-chars", {"job_type": q("t" * 201)}, R),
    SqlCase("type-100k-chars", {"job_type": q("t" * 100_000)}, R),
    SqlCase("type-invalid-utf8", {"job_type": ("convert_from('\\xff'::bytea, 'UTF8')",
                                               "CAST(X'62693aff' AS TEXT)")},
            (R, ALONE)),
    SqlCase("type-with-nul", {"job_type": ("'bi:record' || chr(0)", "'bi:record' || char(0)")},
            (R, ALONE)),
    SqlCase("type-trailing-newline",
            {"job_type": (f"'{RECORD}' || chr(10)", f"'{RECORD}' || char(10)")}, ALONE),
    # payload
    SqlCase("payload-null", {"payload": "NULL"}, R),
    SqlCase("payload-array", {"payload": "'[1, 2]'"}, R),
    SqlCase("payload-string", {"payload": q('"text"')}, R),
    SqlCase("payload-number", {"payload": "'42'"}, R),
    SqlCase("payload-boolean", {"payload": "'true'"}, R),
    SqlCase("payload-json-null", {"payload": "'null'"}, R),
    SqlCase("payload-not-json", {"payload": "'not json'"}, R),
    SqlCase("payload-empty-text", {"payload": "''"}, R),
    SqlCase("payload-trailing-garbage", {"payload": "'{} x'"}, R),
    SqlCase("payload-nan", {"payload": q('{"x": NaN}')}, R),
    SqlCase("payload-nul-escape", {"payload": q('{"s": "\\u0000"}')}, (R, RUNS)),
    SqlCase("payload-lone-surrogate", {"payload": q('{"s": "\\ud800"}')}, (R, RUNS)),
    SqlCase("payload-5000-digit-number", {"payload": q(HUGE_INT)}, DEAD, "invalid_payload"),
    SqlCase("payload-nested-3000-deep", {"payload": q(DEEP)}, (DEAD, R), "invalid_payload"),
    SqlCase("payload-2mb", {"payload": q('{"blob": "' + "x" * 2_000_000 + '"}')}, RUNS),
    # scheduled_at
    SqlCase("scheduled-year-9999", {"scheduled_at": ("'9999-12-31 23:59:59+00'", "253402300799.0")},
            ALONE),
    SqlCase("scheduled-infinity", {"scheduled_at": ("'infinity'", "1e999")}, ALONE),
    SqlCase("scheduled-after-year-9999", {"scheduled_at": ("'20000-01-01'", "1e18")}, ALONE),
    SqlCase("scheduled-minus-infinity", {"scheduled_at": ("'-infinity'", "-1e999")}, RUNS),
    SqlCase("scheduled-before-year-1", {"scheduled_at": ("'0100-01-01 BC'", "-1e18")}, RUNS),
    SqlCase("scheduled-null", {"scheduled_at": "NULL"}, R),
    SqlCase("scheduled-text", {"scheduled_at": ("'tomorrow'", "'tomorrow'")}, (ALONE, R)),
    SqlCase("scheduled-integer", {"scheduled_at": ("'epoch'", "0")}, RUNS),
    # max_attempts / attempts
    SqlCase("max-attempts-negative", {"max_attempts": "-1"}, R),
    SqlCase("max-attempts-zero", {"max_attempts": "0"}, R),
    SqlCase("max-attempts-1001", {"max_attempts": "1001"}, R),
    # PostgreSQL: NULL is the column left out, filled with the type's published value or 25
    # (docs/job-types.md); SQLite refuses it.
    SqlCase("max-attempts-null", {"max_attempts": "NULL"}, (RUNS, R)),
    SqlCase("queue-null", {"queue": "NULL"}, (RUNS, R)),
    SqlCase("attempts-negative", {"attempts": "-1"}, R),
    SqlCase("attempts-over-max", {"attempts": "5", "max_attempts": "3"}, RUNS),
    SqlCase("attempts-over-max-failing", {"job_type": "'sys:fail'", "attempts": "5",
                                          "max_attempts": "3", "payload": q('{"retryable": true}')},
            FAILS, "SysFailError"),
    # status
    SqlCase("status-unknown", {"status": "'paused'"}, R),
    SqlCase("status-upper-case", {"status": "'QUEUED'"}, R),
    SqlCase("status-empty", {"status": "''"}, R),
    SqlCase("status-null", {"status": "NULL"}, R),
    SqlCase("status-completed", {"status": "'completed'"}, ALONE),
    # nobody heartbeats a lease-less running row: the reaper takes it back and it runs once
    SqlCase("status-running-without-lease", {"status": "'running'", "locked_by": "'ghost'"}, RUNS),
    SqlCase("status-running-lease-expired", {"status": "'running'", "locked_by": "'ghost'",
                                             "attempts": "1", "fence": "7",
                                             "lease_expires_at": NOW_MINUS_HOUR}, RUNS),
    # queue
    SqlCase("queue-with-spaces", {"queue": "'my queue'"}, R),
    SqlCase("queue-empty", {"queue": "''"}, R),
    SqlCase("queue-65-chars", {"queue": q("q" * 65)}, R),
    SqlCase("queue-trailing-newline", {"queue": ("'default' || chr(10)", "'default' || char(10)")}, R),
    SqlCase("queue-non-ascii", {"queue": q("d\u00e9faut")}, R),
    SqlCase("queue-sql-looking", {"queue": q("default'; DROP TABLE background_jobs; --")}, R),
    SqlCase("queue-nobody-serves", {"queue": "'nobody_serves_this'"}, ALONE),
    # tenant, priority, ids, other columns
    SqlCase("tenant-empty", {"tenant_id": "''"}, R),
    SqlCase("tenant-201-chars", {"tenant_id": q("t" * 201)}, R),
    SqlCase("tenant-null", {"tenant_id": "NULL"}, R),
    SqlCase("priority-int32-overflow", {"priority": ("2147483648", "4611686018427387904")},
            (R, RUNS)),
    SqlCase("priority-int32-min", {"priority": "-2147483648"}, RUNS),
    SqlCase("fence-negative", {"fence": "-5"}, RUNS),
    SqlCase("id-with-19-digits", {"id": "4611686018427387904"}, RUNS),
    SqlCase("created-at-infinity", {"created_at": ("'infinity'", "1e999")}, RUNS),
    SqlCase("idempotency-first", {"tenant_id": "'acme'", "idempotency_key": "'bi-dup'"}, RUNS),
    SqlCase("idempotency-duplicate", {"tenant_id": "'acme'", "idempotency_key": "'bi-dup'"}, R),
]


@dataclass(eq=False)
class Recorder:
    runs: Counter[int] = field(default_factory=Counter)

    async def handler(self, ctx: JobContext) -> None:
        self.runs[ctx.job_id] += 1


async def _insert(url: str, statement: str) -> int:
    rows = await sql(url, statement)
    return int(rows[0][0])


@pytest.mark.parametrize(
    ("backend_url", "with_redis"),
    [("postgres", True), ("sqlite", False)],
    ids=["postgres-streams", "sqlite-polling"],
    indirect=["backend_url"],
)
async def test_rows_written_by_foreign_sql(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    postgres = is_postgres(backend_url)
    recorder = Recorder()
    registry = make_registry(HandlerSpec(RECORD, recorder.handler))
    settings = make_settings(backend_url, redis_url if with_redis else "")
    async with running_worker(settings, registry=registry) as worker:
        store = worker.store
        canary_before = await _insert(backend_url, SqlCase("canary", {}, RUNS).sql(postgres))
        await wait_for_status(store, canary_before, JobStatus.COMPLETED)

        accepted: dict[str, int] = {}
        wrong: list[str] = []
        for case in CASES:
            want = case.expected(postgres)
            try:
                accepted[case.name] = await _insert(backend_url, case.sql(postgres))
            except Exception as exc:  # the driver's own error: the database said no
                if want is not Expect.REJECTED:
                    wrong.append(f"{case.name}: refused ({type(exc).__name__}: {exc}), expected "
                                 f"{want.value}")
            else:
                if want is Expect.REJECTED:
                    wrong.append(f"{case.name}: accepted, expected the database to refuse it")
        tried("sql", len(CASES))
        assert not wrong, "\n".join(wrong)
        inserted = {j.id: j for j in await all_jobs(store) if j.id in accepted.values()}

        # A job written after the corpus starts promptly: nothing stalls intake.
        canary_after = await _insert(backend_url, SqlCase("canary", {}, RUNS).sql(postgres))
        late = await wait_for_status(store, canary_after, JobStatus.COMPLETED, timeout_s=5)
        assert seconds(late.locked_at, late.created_at) < 1.0, late

        final_status = {Expect.RUNS: JobStatus.COMPLETED, Expect.DEAD: JobStatus.DEAD,
                        Expect.FAILS: JobStatus.DEAD}
        terminal = {accepted[c.name]: final_status[c.expected(postgres)] for c in CASES
                    if c.expected(postgres) in final_status}

        async def settled() -> dict[int, Job] | None:
            jobs = {j.id: j for j in await all_jobs(store)}
            done = all(jobs[i].status is s for i, s in terminal.items())
            return jobs if done else None

        jobs = await wait_until(settled, timeout_s=20, what="every runnable case finished")
        assert jobs is not None
        counters = dict(worker.counters)

    problems: list[str] = []
    for case in CASES:
        want = case.expected(postgres)
        if want is Expect.REJECTED:
            continue
        job_id = accepted[case.name]
        job = jobs[job_id]
        runs = recorder.runs[job_id]
        if want is Expect.RUNS and (runs != 1 or job.job_type != RECORD):
            problems.append(f"{case.name}: ran {runs} times")
        if want is Expect.DEAD and (runs != 0 or job.error_class != case.error_class):
            problems.append(f"{case.name}: ran {runs} times, error_class {job.error_class}")
        if want is Expect.FAILS and (job.error_class != case.error_class or job.fence != 1):
            problems.append(f"{case.name}: error_class {job.error_class}, fence {job.fence}")
        if want is Expect.LEFT_ALONE and job.to_dict() != inserted[job_id].to_dict():
            problems.append(f"{case.name}: changed: {inserted[job_id]} -> {job}")
    assert not problems, "\n".join(problems)
    # Nothing but the accepted rows and the two canaries exists.
    assert set(jobs) == {canary_before, canary_after, *accepted.values()}
    assert recorder.runs[canary_before] == 1 and recorder.runs[canary_after] == 1
    assert counters.get("store_errors", 0) == 0, counters
