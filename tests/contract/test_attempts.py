"""JobStore contract: per-attempt history (``job_attempts``, store/attempts.py). Every way a
run ends records it, in the same write as the job's fenced change and only when that
change applied; each job keeps its newest ATTEMPTS_KEPT_PER_JOB; the rows go with the job."""

from __future__ import annotations

from datetime import timedelta

from gochatd.loops.retention import RetentionPolicy, prune_once
from gochatd.model import (
    AttemptOutcome,
    ClaimedJob,
    Finish,
    Job,
    JobAction,
    JobAttempt,
    JobSelection,
    JobStatus,
    Outcome,
    Reply,
)
from gochatd.store import JobStore
from gochatd.store.attempts import ATTEMPTS_KEPT_PER_JOB
from tests.contract.helpers import (
    CLOCK_SLACK_S,
    claim_one,
    enqueue,
    finish,
    is_postgres,
    raw_sql,
)
from tests.support.wait import wait_until

SHORT_LEASE_S = 0.3
SLACK = timedelta(seconds=CLOCK_SLACK_S)


async def _run(store: JobStore, job: Job, outcome: Outcome, owner: str = "w1",
               **kwargs: object) -> ClaimedJob:
    """One run: claim, then finish with ``outcome``; the finish must apply."""
    claimed = await claim_one(store, await _row(store, job), owner)
    assert await store.finish_jobs([finish(claimed, outcome, **kwargs)]) == {job.id}
    return claimed


async def _row(store: JobStore, job: Job) -> Job:
    row = await store.get_job(job.id)
    assert row is not None
    return row


async def _attempt_count(url: str, job_id: int | None = None) -> int:
    if job_id is None:
        rows = await raw_sql(url, "SELECT count(*) FROM job_attempts")
    else:
        rows = await raw_sql(url, "SELECT count(*) FROM job_attempts WHERE job_id = ?", [job_id])
    return int(rows[0][0])


async def test_a_completed_run_is_recorded(store: JobStore) -> None:
    job = await enqueue(store)
    assert await store.list_job_attempts(job.id) == []  # never run
    claimed = await _run(store, job, Outcome.COMPLETED, owner="worker-a")
    done = await _row(store, job)
    [attempt] = await store.list_job_attempts(job.id)
    assert attempt == JobAttempt(
        attempt=1, started_at=claimed.job.locked_at, finished_at=attempt.finished_at,
        worker="worker-a", outcome=AttemptOutcome.COMPLETED, error_class=None, error=None)
    # Database clock: started at the claim, finished when the completion was written.
    assert claimed.job.locked_at is not None and attempt.finished_at is not None
    assert attempt.finished_at + SLACK >= claimed.job.locked_at
    assert done.completed_at is not None
    assert abs((attempt.finished_at - done.completed_at).total_seconds()) <= CLOCK_SLACK_S
    assert await store.list_job_attempts(999_999) == []


async def test_retry_then_dead_newest_first_with_the_rows_error(store: JobStore) -> None:
    job = await enqueue(store, max_attempts=2)
    await _run(store, job, Outcome.RETRY, owner="w1", error_class="ValueError",
               last_error="bad input [payload]")
    retrying = await _row(store, job)
    assert retrying.status is JobStatus.RETRYING
    await _run(store, job, Outcome.DEAD, owner="w2", error_class="timeout",
               last_error="handler timed out after 1s")
    dead = await _row(store, job)
    second, first = await store.list_job_attempts(job.id)
    assert (first.attempt, first.outcome, first.worker) == (1, AttemptOutcome.RETRYING, "w1")
    assert (first.error_class, first.error) == ("ValueError", "bad input [payload]")
    assert (second.attempt, second.outcome, second.worker) == (2, AttemptOutcome.DEAD, "w2")
    # The error is the one the job row stores (redacted and capped by the runner).
    assert (second.error_class, second.error) == (dead.error_class, dead.last_error)
    assert first.finished_at is not None and second.started_at is not None
    assert second.started_at + SLACK >= first.finished_at


async def test_cancelled_and_interrupted_runs(store: JobStore) -> None:
    job = await enqueue(store)
    await _run(store, job, Outcome.INTERRUPTED, error_class="interrupted",
               last_error="interrupted by worker shutdown")
    back = await _row(store, job)
    assert (back.status, back.attempts) == (JobStatus.RETRYING, 0)  # attempt refunded
    await _run(store, job, Outcome.CANCELLED, error_class="cancelled",
               last_error="cancelled by operator")
    cancelled, interrupted = await store.list_job_attempts(job.id)
    # The refunded run keeps its own row: attempts are numbered by claim (the fence).
    assert (interrupted.attempt, interrupted.outcome) == (1, AttemptOutcome.INTERRUPTED)
    assert interrupted.error == "interrupted by worker shutdown"
    assert (cancelled.attempt, cancelled.outcome) == (2, AttemptOutcome.CANCELLED)
    assert cancelled.error_class == "cancelled"


async def test_a_reaped_lease_is_recorded_and_the_stale_finish_is_not(store: JobStore) -> None:
    job = await enqueue(store)
    old = await claim_one(store, job, "old-owner", lease_s=SHORT_LEASE_S)

    async def reaped() -> bool:
        return job.id in [r.job_id for r in (await store.reap_expired_leases()).retried]

    await wait_until(reaped, timeout_s=5.0, interval_s=0.05, what="expired lease reaped")
    [attempt] = await store.list_job_attempts(job.id)
    row = await _row(store, job)
    assert (attempt.attempt, attempt.worker) == (1, "old-owner")
    assert (attempt.outcome, attempt.error_class) == (AttemptOutcome.LEASE_EXPIRED,
                                                      "lease_expired")
    assert attempt.error == row.last_error and attempt.started_at == old.job.locked_at
    # The old owner's late finish matches no row and records nothing.
    assert await store.finish_jobs([finish(old, Outcome.COMPLETED)]) == set()
    assert await store.list_job_attempts(job.id) == [attempt]


async def test_a_stale_finish_in_a_batch_records_only_the_applied_rows(
    store: JobStore, backend_url: str
) -> None:
    fresh, other = await enqueue(store, "a"), await enqueue(store, "b")
    ok = await claim_one(store, fresh, "w1")
    mine = await claim_one(store, other, "w1")
    wrong_fence = Finish(job_id=other.id, lease_owner="w1", fence=mine.fence + 7,
                         outcome=Outcome.COMPLETED, tenant_id=other.tenant_id)
    wrong_owner = Finish(job_id=other.id, lease_owner="w9", fence=mine.fence,
                         outcome=Outcome.DEAD, tenant_id=other.tenant_id)
    applied = await store.finish_jobs([finish(ok, Outcome.COMPLETED), wrong_fence, wrong_owner])
    assert applied == {fresh.id}
    assert [a.outcome for a in await store.list_job_attempts(fresh.id)] == [
        AttemptOutcome.COMPLETED]
    assert await store.list_job_attempts(other.id) == []
    # The completed run is read from the job's row: a success writes no job_attempts row.
    assert await _attempt_count(backend_url) == 0
    # A finish of a job that is not running (already finished) records nothing either.
    assert await store.finish_jobs([finish(ok, Outcome.DEAD)]) == set()
    assert await _attempt_count(backend_url) == 0
    assert len(await store.list_job_attempts(fresh.id)) == 1


async def test_a_completion_with_replies_records_its_attempt(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    reply = Reply(channel="webhook", recipient="to-a", body={"text": "hi"}, dedupe_key="k1")
    stale = await enqueue(store, "other")
    stale_claim = await claim_one(store, stale, "w1")
    stale_finish = Finish(job_id=stale.id, lease_owner="w1", fence=stale_claim.fence + 1,
                          outcome=Outcome.COMPLETED, tenant_id=stale.tenant_id,
                          replies=(reply,))
    applied = await store.finish_jobs(
        [finish(claimed, Outcome.COMPLETED, replies=(reply,)), stale_finish])
    assert applied == {job.id}
    [attempt] = await store.list_job_attempts(job.id)
    assert (attempt.attempt, attempt.outcome, attempt.worker) == (
        1, AttemptOutcome.COMPLETED, "w1")
    assert await store.list_job_attempts(stale.id) == []


async def test_each_job_keeps_its_newest_attempts(store: JobStore, backend_url: str) -> None:
    runs = ATTEMPTS_KEPT_PER_JOB + 5
    job = await enqueue(store, max_attempts=runs + 10)
    neighbour = await enqueue(store, "neighbour")
    await _run(store, neighbour, Outcome.COMPLETED)
    for _ in range(runs):
        await _run(store, job, Outcome.RETRY, error_class="E", last_error="again")
    kept = await store.list_job_attempts(job.id)
    assert [a.attempt for a in kept] == list(range(runs, runs - ATTEMPTS_KEPT_PER_JOB, -1))
    assert await _attempt_count(backend_url, job.id) == ATTEMPTS_KEPT_PER_JOB
    assert len(await store.list_job_attempts(neighbour.id)) == 1  # other jobs untouched
    # The reaper's path trims too.
    await claim_one(store, await _row(store, job), "w1", lease_s=SHORT_LEASE_S)

    async def reaped() -> bool:
        return job.id in [r.job_id for r in (await store.reap_expired_leases()).retried]

    await wait_until(reaped, timeout_s=5.0, interval_s=0.05, what="expired lease reaped")
    kept = await store.list_job_attempts(job.id)
    assert kept[0].attempt == runs + 1 and kept[0].outcome is AttemptOutcome.LEASE_EXPIRED
    assert [a.attempt for a in kept] == list(range(runs + 1, runs + 1 - ATTEMPTS_KEPT_PER_JOB,
                                                   -1))
    assert await _attempt_count(backend_url, job.id) == ATTEMPTS_KEPT_PER_JOB


async def test_attempts_go_with_their_job(store: JobStore, backend_url: str) -> None:
    old = await enqueue(store, "old")
    await _run(store, old, Outcome.RETRY, error_class="E", last_error="first")
    await _run(store, old, Outcome.COMPLETED)
    recent = await enqueue(store, "recent")
    await _run(store, recent, Outcome.COMPLETED)
    doomed = await enqueue(store, "doomed")
    await _run(store, doomed, Outcome.DEAD, error_class="E", last_error="boom")
    shift = ("updated_at - make_interval(secs => 7200)" if is_postgres(backend_url)
             else "updated_at - 7200")
    await raw_sql(backend_url, f"UPDATE background_jobs SET updated_at = {shift} WHERE id = ?",
                  [old.id])
    assert await _attempt_count(backend_url) == 2  # the retry and the dead run
    # Retention (the loop's own pass) deletes the old job and, with it, its attempts.
    pruned = await prune_once(store, RetentionPolicy(3600.0, 0.0, 0.0, 100), pause_s=0.0)
    assert pruned[JobStatus.COMPLETED] == 1
    assert await store.get_job(old.id) is None
    assert await store.list_job_attempts(old.id) == []
    assert await _attempt_count(backend_url, old.id) == 0
    assert len(await store.list_job_attempts(recent.id)) == 1
    # Any other DELETE of a job takes its attempts too: an operator's, one or in bulk...
    await store.delete_job(recent.id)
    assert await store.list_job_attempts(recent.id) == []
    assert await _attempt_count(backend_url, recent.id) == 0
    bulk = await store.control_jobs(JobAction.DELETE, JobSelection(ids=(doomed.id,)))
    assert bulk.changed == 1
    assert await _attempt_count(backend_url, doomed.id) == 0
    # ...or foreign SQL's.
    spare = await enqueue(store, "spare")
    await _run(store, spare, Outcome.RETRY, error_class="E", last_error="once")
    await _run(store, spare, Outcome.COMPLETED)
    assert await _attempt_count(backend_url) == 1
    assert len(await store.list_job_attempts(spare.id)) == 2
    await raw_sql(backend_url, "DELETE FROM background_jobs WHERE id = ?", [spare.id])
    assert await _attempt_count(backend_url) == 0
    assert await store.list_job_attempts(spare.id) == []


async def test_a_completed_run_recorded_before_is_listed_once(store: JobStore,
                                                              backend_url: str) -> None:
    """A database that recorded completed runs in job_attempts (before successes were read
    from the job's row) lists each of them once."""
    job = await enqueue(store)
    claimed = await _run(store, job, Outcome.COMPLETED)
    now = "now()" if is_postgres(backend_url) else "0.0"
    await raw_sql(backend_url, "INSERT INTO job_attempts (job_id, attempt, started_at, finished_at,"
                  f" worker, outcome) VALUES (?, ?, {now}, {now}, 'old', 'completed')",
                  [job.id, claimed.fence])
    [attempt] = await store.list_job_attempts(job.id)
    assert (attempt.attempt, attempt.worker, attempt.outcome) == (
        claimed.fence, "old", AttemptOutcome.COMPLETED)
    await _run(store, await enqueue(store, "last"), Outcome.COMPLETED)
    assert await _attempt_count(backend_url) == 1
    if is_postgres(backend_url):  # and a TRUNCATE (which restarts no job ids here)
        await raw_sql(backend_url, "TRUNCATE background_jobs")
        assert await _attempt_count(backend_url) == 0


async def test_a_fence_reset_by_foreign_sql_keeps_the_first_record(
    store: JobStore, backend_url: str
) -> None:
    """A row whose fence was set back (by hand, a restore) runs again under an attempt number
    already recorded: the finish still applies, and the first record stays."""
    job = await enqueue(store)
    await _run(store, job, Outcome.RETRY, error_class="E", last_error="first run")
    await raw_sql(backend_url, "UPDATE background_jobs SET fence = 0 WHERE id = ?", [job.id])
    await _run(store, job, Outcome.COMPLETED, owner="w2")
    assert (await _row(store, job)).status is JobStatus.COMPLETED
    [kept] = await store.list_job_attempts(job.id)
    assert (kept.attempt, kept.outcome, kept.error) == (1, AttemptOutcome.RETRYING, "first run")


async def test_a_batch_with_a_stale_and_the_current_finish_of_one_job(store: JobStore) -> None:
    """The same owner claimed the job again after its lease was reaped; both runs' finishes
    reach one batch: only the current fence's is recorded, with its own outcome."""
    job = await enqueue(store)
    old = await claim_one(store, job, "w1", lease_s=SHORT_LEASE_S)

    async def reaped() -> bool:
        return job.id in [r.job_id for r in (await store.reap_expired_leases()).retried]

    await wait_until(reaped, timeout_s=5.0, interval_s=0.05, what="expired lease reaped")
    new = await claim_one(store, await _row(store, job), "w1")
    applied = await store.finish_jobs(
        [finish(old, Outcome.DEAD, error_class="E", last_error="stale"),
         finish(new, Outcome.COMPLETED)])
    assert applied == {job.id}
    current, reaped_run = await store.list_job_attempts(job.id)
    assert (current.attempt, current.outcome, current.error) == (
        2, AttemptOutcome.COMPLETED, None)
    assert (reaped_run.attempt, reaped_run.outcome) == (1, AttemptOutcome.LEASE_EXPIRED)
