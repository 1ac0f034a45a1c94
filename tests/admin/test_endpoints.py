"""Every admin endpoint over real HTTP against a Worker run in-process, on SQLite (polling)
and on PostgreSQL + Redis Streams."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio

import gochatd
from gochatd.admin.app import create_app
from gochatd.config.rates import QueueRate
from gochatd.context import JobContext
from gochatd.errors import NonRetryable, StoreUnavailable
from gochatd.model import Finish, Outcome
from gochatd.worker.registry import Handler, HandlerSpec
from tests.admin.helpers import (
    PARKED,
    Admin,
    Stack,
    admin_settings,
    admin_worker,
    assert_json_error,
    stays_true,
    write_full_config,
)
from tests.integration.helpers import Tracker, make_registry, wait_for

SECRET = "s3cr3t-payload-value"

#: Every field of a job record as GET /v1/jobs/{id} returns it.
JOB_FIELDS = {
    "id", "tenant_id", "job_type", "queue", "payload", "status", "priority", "attempts",
    "max_attempts", "scheduled_at", "created_at", "updated_at", "fence", "idempotency_key",
    "locked_by", "locked_at", "lease_expires_at", "last_error", "error_class", "failed_at",
    "completed_at", "dispatched_at", "traceparent", "cancel_requested", "result",
}


def flaky() -> Handler:
    """Fails for good on its first claim (with a secret in the error), succeeds after."""

    async def handler(ctx: JobContext) -> None:
        if ctx.fence == 1:
            raise NonRetryable(f"cannot reach {ctx.payload.get('secret')} with password=hunter2")

    return handler


async def untouched(admin: Admin, job_id: int) -> bool:
    job = await admin.job(job_id)
    return bool(job["status"] == "queued" and job["attempts"] == 0 and job["locked_by"] is None)


async def test_probes_status_and_openapi(stack: Stack) -> None:
    async with admin_worker(stack, worker_concurrency=6) as admin:
        assert await admin.get("/healthz") == {"status": "ok"}
        assert await admin.get("/readyz") == {
            "status": "ready", "store": "ok", "dispatch": stack.mode, "draining": False,
            "degraded": None,
        }
        status = await admin.status()
        assert status["worker_id"] == admin.worker.worker_id
        assert status["mode"] == stack.mode
        assert status["concurrency"] == 6
        assert status["in_flight"] == 0
        assert status["draining"] is False and status["paused"] is False
        assert status["paused_queues"] == []
        assert status["version"] == gochatd.__version__
        assert status["config_reloaded_at"] is None
        assert status["pending_restart"] == []
        assert 0 <= status["uptime_s"] < 60
        started = datetime.fromisoformat(status["started_at"])
        assert abs((datetime.now(UTC) - started).total_seconds() - status["uptime_s"]) < 5
        await admin.wait_status(lambda s: s["uptime_s"] > status["uptime_s"], what="uptime grows")
        # Units handed to connection threads, per pool (the budget's thread hops): the idle
        # worker's own loops keep handing some over.
        handed = sum(status["handoffs"].values())
        assert handed > 0 and all(isinstance(n, int) for n in status["handoffs"].values())
        await admin.wait_status(lambda s: sum(s["handoffs"].values()) > handed,
                                what="hand-offs are counted")

        doc = await admin.get("/v1/openapi.json")
        assert doc["openapi"].startswith("3.")
        assert doc["info"]["version"] == gochatd.__version__
        # What the app serves and what the document describes are the same set of operations.
        served: set[tuple[str, str]] = set()
        for rule in create_app(admin.worker).url_map.iter_rules():
            if rule.endpoint == "static":
                continue
            path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
            served |= {(path, m.lower()) for m in (rule.methods or set()) - {"HEAD", "OPTIONS"}}
        documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
        assert served == documented
        # 24 admin operations (4 of them job controls, 1 whether a token is required), 3 of
        # the outbox, 4 of the gateway (jobs, jobs:batch, chains, batches), GET /v1/tenants,
        # GET /v1/periodic and the fleet dashboard's 6 (throughput, fleet, its 3 requests, job
        # counts), GET /v1/batches/{id}.
        assert len(documented) == 40
        assert doc["paths"]["/v1/jobs:batch"]["post"]["security"] == [{"tenantKey": []}]
        # Without a token (loopback only) no operation asks for one.
        assert doc["security"] == []


async def test_local_pause_drain_and_resume(stack: Stack) -> None:
    async with admin_worker(stack) as admin:
        paused = await admin.post("/v1/pause")
        assert paused["paused"] is True and paused["draining"] is False
        # A local pause keeps the process ready: it is still healthy, just not claiming.
        assert (await admin.get("/readyz"))["status"] == "ready"
        job = await admin.worker.client.enqueue("sys:noop", {})
        await stays_true(lambda: untouched(admin, job.id), for_s=0.6,
                         what="a paused worker claims nothing")
        resumed = await admin.post("/v1/resume")
        assert resumed["paused"] is False
        await admin.wait_job(job.id, "completed")

        drained = await admin.post("/v1/drain")
        assert drained["draining"] is True and drained["drained"] is True
        assert drained["exit_when_drained"] is False
        not_ready = await admin.http.get("/readyz")
        assert not_ready.status_code == 503
        assert not_ready.json() == {
            "status": "not_ready", "store": "ok", "dispatch": stack.mode, "draining": True,
            "degraded": None,
        }
        assert (await admin.status())["draining"] is True
        assert (await admin.post("/v1/resume"))["draining"] is False
        assert (await admin.get("/readyz"))["status"] == "ready"
        late = await admin.worker.client.enqueue("sys:noop", {})
        await admin.wait_job(late.id, "completed")


async def test_readyz_says_why_while_the_store_refuses_writes(stack: Stack) -> None:
    # A full disk: reads (the probe's own) still work, the loops' writes fail. Their
    # failure is what the daemon records; /readyz reports the last one, then recovers.
    async with admin_worker(stack) as admin:
        assert (await admin.get("/readyz"))["status"] == "ready"
        admin.worker.counters.transient_error(
            "finish_failed", StoreUnavailable("postgres unavailable: DiskFull"))
        failing = await admin.http.get("/readyz")
        assert failing.status_code == 503
        assert failing.json() == {
            "status": "not_ready", "store": "failing", "dispatch": stack.mode,
            "draining": False, "store_error": "finish: postgres unavailable: DiskFull",
            "degraded": None,
        }
        assert await admin.get("/healthz") == {"status": "ok"}


async def test_queue_counts_agree_with_what_was_enqueued(stack: Stack) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    async with admin_worker(stack, registry=registry, worker_queues={"default": 3, "high": 5},
                            worker_queue_limits={"default": 4},
                            worker_queue_rates={"high": QueueRate(10, 1)}) as admin:
        client, store = admin.worker.client, admin.worker.store
        # PARKED is claimed by nobody but "other-worker", a second holder of the same store.
        retrying = await client.enqueue("sys:noop", {}, queue=PARKED, priority=10)
        [claimed] = await store.claim_due_jobs([PARKED], 1, "other-worker", 60.0)
        assert claimed.id == retrying.id
        applied = await store.finish_jobs([Finish(
            retrying.id, "other-worker", claimed.fence, Outcome.RETRY, "default", delay_s=3600.0,
            error_class="Boom", last_error="boom")])
        assert applied == {retrying.id}
        running = await client.enqueue("sys:noop", {}, queue=PARKED, priority=10)
        [held] = await store.claim_due_jobs([PARKED], 1, "other-worker", 60.0)
        assert held.id == running.id
        first_due_at = trio.current_time()
        for _ in range(4):
            await client.enqueue("sys:noop", {}, queue=PARKED)
        for _ in range(2):
            await client.enqueue("sys:noop", {}, queue=PARKED, delay_s=3600)
        # default: two handlers running here, two jobs dead here.
        blocked = [await client.enqueue("test:block", {}) for _ in range(2)]
        dead = [await client.enqueue("sys:fail", {"retryable": False}) for _ in range(2)]
        await wait_for(lambda: len(tracker.blocked) == 2, what="two handlers running")
        for job in dead:
            await admin.wait_job(job.id, "dead")

        queues = await admin.queues()
        parked = queues.pop(PARKED)
        age = parked.pop("oldest_due_age_s")
        assert 0 <= age <= trio.current_time() - first_due_at + 1.0
        # Each job counted once: the retrying job (not yet due) is under retrying, not delayed.
        assert parked == {"queue": PARKED, "queued": 4, "delayed": 2, "running": 1,
                          "retrying": 1, "dead": 0, "paused": False, "weight": 0,
                          "max_running": None, "rate": None}
        assert queues.pop("default") == {
            "queue": "default", "queued": 0, "delayed": 0, "running": 2, "retrying": 0,
            "dead": 2, "oldest_due_age_s": None, "paused": False, "weight": 3,
            "max_running": 4, "rate": None,
        }
        assert queues.pop("high") == {
            "queue": "high", "queued": 0, "delayed": 0, "running": 0, "retrying": 0,
            "dead": 0, "oldest_due_age_s": None, "paused": False, "weight": 5,
            "max_running": None, "rate": "10/s",  # worker.queue_rates as written
        }
        assert queues == {}
        assert (await admin.status())["in_flight"] == 2

        tracker.release_all()
        for job in blocked:
            await admin.wait_job(job.id, "completed")
        default = (await admin.queues())["default"]
        assert (default["running"], default["dead"]) == (0, 2)


async def test_fleet_queue_pause_and_resume(stack: Stack) -> None:
    async with admin_worker(stack) as admin:
        unknown = await admin.http.post("/v1/queues/no-such-queue/pause")
        assert assert_json_error(unknown, 404) == "unknown_queue"

        assert await admin.post("/v1/queues/default/pause") == {
            "queue": "default", "paused": True, "changed": True}
        assert (await admin.post("/v1/queues/default/pause"))["changed"] is False
        assert (await admin.queues())["default"]["paused"] is True
        assert (await admin.status())["paused_queues"] == ["default"]  # this process: at once

        job = await admin.worker.client.enqueue("sys:noop", {})
        other = await admin.worker.client.enqueue("sys:noop", {}, queue="high")
        await admin.wait_job(other.id, "completed")  # the other queues go on
        await stays_true(lambda: untouched(admin, job.id), for_s=0.8,
                         what="nothing is claimed from a paused queue")

        assert await admin.post("/v1/queues/default/resume") == {
            "queue": "default", "paused": False, "changed": True}
        await admin.wait_job(job.id, "completed")
        assert (await admin.post("/v1/queues/default/resume"))["changed"] is False
        assert (await admin.queues())["default"]["paused"] is False
        assert (await admin.status())["paused_queues"] == []


async def test_job_listing_filters_and_cursor_pagination(stack: Stack) -> None:
    async with admin_worker(stack) as admin:
        client = admin.worker.client
        parked: dict[int, tuple[str, str]] = {}
        for i in range(23):
            tenant, job_type = f"t{i % 2 + 1}", "test:b" if i % 3 == 0 else "test:a"
            job = await client.enqueue(job_type, {"i": i}, queue=PARKED, tenant_id=tenant)
            parked[job.id] = (tenant, job_type)
        done = [(await client.enqueue("sys:noop", {})).id for _ in range(3)]
        for job_id in done:
            await admin.wait_job(job_id, "completed")
        everything = set(parked) | set(done)

        async def walk(limit: int, **filters: str) -> list[dict[str, Any]]:
            seen: list[dict[str, Any]] = []
            cursor: str | None = None
            for _ in range(100):
                params: dict[str, str | int] = {"limit": limit, **filters}
                if cursor is not None:
                    params["cursor"] = cursor
                page = await admin.get("/v1/jobs", params=params)
                assert len(page["jobs"]) <= limit
                seen.extend(page["jobs"])
                cursor = page["next_cursor"]
                if cursor is None:
                    return seen
                assert cursor == str(page["jobs"][-1]["id"])
            raise AssertionError("pagination never ended")

        jobs = await walk(4)
        ids = [j["id"] for j in jobs]
        assert len(ids) == len(set(ids)) == 26  # every job exactly once
        assert set(ids) == everything and ids == sorted(ids, reverse=True)  # newest first
        assert all(set(j) == JOB_FIELDS for j in jobs)
        oldest = [j["id"] for j in await walk(4, order="oldest")]
        assert oldest == sorted(everything)

        def ids_of(page: list[dict[str, Any]]) -> set[int]:
            return {j["id"] for j in page}

        assert ids_of(await walk(5, status="queued")) == set(parked)
        assert ids_of(await walk(50, status="completed")) == set(done)
        assert ids_of(await walk(7, queue=PARKED)) == set(parked)
        assert ids_of(await walk(7, queue="default")) == set(done)
        t1 = {i for i, (tenant, _) in parked.items() if tenant == "t1"}
        by_tenant = await walk(3, tenant="t1")
        assert [j["id"] for j in by_tenant] == sorted(t1, reverse=True)
        assert all(j["tenant_id"] == "t1" for j in by_tenant)
        t2_b = {i for i, (tenant, jt) in parked.items() if tenant == "t2" and jt == "test:b"}
        assert t2_b and ids_of(await walk(2, tenant="t2", job_type="test:b")) == t2_b
        assert await walk(10, job_type="test:a", status="completed") == []
        first = await admin.get("/v1/jobs", params={"limit": 500})
        assert first["next_cursor"] is None and len(first["jobs"]) == 26
        default_page = await admin.get("/v1/jobs")
        assert len(default_page["jobs"]) == 26  # the default limit (50) holds them all


async def test_job_record_retry_and_cancel(stack: Stack) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()),
                             HandlerSpec("test:flaky", flaky()))
    lease_s = 1.5
    async with admin_worker(stack, registry=registry, worker_lease_s=lease_s) as admin:
        client = admin.worker.client
        # dead -> record -> retry -> queued -> completes
        failing = await client.enqueue("test:flaky", {"secret": SECRET})
        dead = await admin.wait_job(failing.id, "dead")
        # The operator's answer adds the job's runs and its place in a workflow.
        assert set(dead) == JOB_FIELDS | {"attempt_history", "waits_on", "batch_id",
                                          "callback_of", "depends_on"}
        assert (dead["attempts"], dead["fence"]) == (1, 1)
        assert dead["locked_by"] == admin.worker.worker_id
        assert dead["error_class"] == "non_retryable"
        assert dead["failed_at"] is not None
        last_error = dead["last_error"]
        assert SECRET not in last_error and "hunter2" not in last_error
        assert "[payload]" in last_error and "password=***" in last_error
        # The run's record: the same redacted error, the worker, the claim and finish times.
        [run] = dead["attempt_history"]
        assert {k: run[k] for k in ("attempt", "outcome", "worker", "error_class", "error")} == {
            "attempt": 1, "outcome": "dead", "worker": admin.worker.worker_id,
            "error_class": "non_retryable", "error": last_error}
        assert run["started_at"] == dead["locked_at"]
        assert run["finished_at"] == dead["failed_at"]
        retried = await admin.post(f"/v1/jobs/{failing.id}/retry")
        assert (retried["status"], retried["attempts"]) == ("queued", 0)
        completed = await admin.wait_job(failing.id, "completed")
        assert (completed["attempts"], completed["fence"]) == (1, 2)
        # After the operator's retry the count starts again; the history keeps both runs.
        assert [(r["attempt"], r["outcome"], r["error"]) for r in completed["attempt_history"]
                ] == [(2, "completed", None), (1, "dead", last_error)]
        conflict = await admin.http.post(f"/v1/jobs/{failing.id}/retry")
        assert assert_json_error(conflict, 409) == "invalid_transition"
        assert assert_json_error(await admin.http.post(f"/v1/jobs/{failing.id}/cancel"),
                                 409) == "invalid_transition"

        # queued -> cancelled -> (retry) -> queued
        waiting = await client.enqueue("sys:noop", {}, queue=PARKED)
        cancelled = await admin.post(f"/v1/jobs/{waiting.id}/cancel")
        assert (cancelled["status"], cancelled["error_class"]) == ("cancelled", "cancelled")
        assert (await admin.job(waiting.id))["status"] == "cancelled"
        assert_json_error(await admin.http.post(f"/v1/jobs/{waiting.id}/cancel"), 409)
        assert (await admin.post(f"/v1/jobs/{waiting.id}/retry"))["status"] == "queued"

        # running -> cancel requested -> the heartbeat cancels the handler within a lease
        job = await client.enqueue("test:block", {})
        await wait_for(lambda: job.id in tracker.blocked, what="handler running")
        running = await admin.job(job.id)
        assert running["status"] == "running" and running["locked_by"] == admin.worker.worker_id
        assert running["lease_expires_at"] is not None and running["locked_at"] is not None
        assert (running["fence"], running["attempts"]) == (1, 1)
        asked = trio.current_time()
        requested = await admin.post(f"/v1/jobs/{job.id}/cancel")
        assert requested["status"] == "running" and requested["cancel_requested"] is True
        final = await admin.wait_job(job.id, "cancelled", timeout_s=lease_s * 2)
        assert trio.current_time() - asked < lease_s
        assert final["error_class"] == "cancelled" and final["cancel_requested"] is False
        assert tracker.interrupted == [job.id] and tracker.completed == []

        for method, path in (("GET", "/v1/jobs/987654321"), ("POST", "/v1/jobs/987654321/retry"),
                             ("POST", "/v1/jobs/987654321/cancel")):
            missing = await admin.http.request(method, path)
            assert assert_json_error(missing, 404) == "not_found"


async def test_bulk_retry_by_filter(stack: Stack) -> None:
    registry = make_registry(HandlerSpec("test:flaky", flaky()))
    async with admin_worker(stack, registry=registry) as admin:
        client = admin.worker.client
        acme = [(await client.enqueue("test:flaky", {"secret": SECRET}, tenant_id="acme")).id
                for _ in range(3)]
        other = [(await client.enqueue("sys:fail", {"retryable": False}, tenant_id="other")).id
                 for _ in range(2)]
        for job_id in acme + other:
            await admin.wait_job(job_id, "dead")

        result = await admin.post("/v1/jobs/retry", json={"tenant": "acme"})
        assert result == {"retried": 3, "ids": sorted(acme)}
        for job_id in acme:
            assert (await admin.wait_job(job_id, "completed"))["fence"] == 2
        assert {(await admin.job(i))["status"] for i in other} == {"dead"}
        assert await admin.post("/v1/jobs/retry", json={"tenant": "acme"}) == {"retried": 0, "ids": []}
        assert await admin.post("/v1/jobs/retry", json={"queue": PARKED}) == {"retried": 0, "ids": []}
        one = await admin.post("/v1/jobs/retry", json={"job_type": "sys:fail", "limit": 1})
        assert one == {"retried": 1, "ids": [min(other)]}
        assert (await admin.job(max(other)))["status"] == "dead"


async def test_reload_reports_applied_and_restart_only_keys(
    stack: Stack, tmp_path: Path
) -> None:
    config = tmp_path / "gochatd.yaml"
    write_full_config(config, admin_settings(stack, worker_concurrency=4))
    async with admin_worker(stack, reload_args={"config_file": str(config)},
                            worker_concurrency=4) as admin:
        write_full_config(config, admin_settings(stack, worker_concurrency=4),
                          worker_concurrency=2, worker_lease_s=7.0)
        before = datetime.now(UTC)
        reloaded = await admin.post("/v1/reload")
        assert reloaded["applied"] == ["worker.concurrency"]
        assert reloaded["needs_restart"] == ["worker.lease_s"]
        at = datetime.fromisoformat(reloaded["reloaded_at"])
        assert before <= at <= datetime.now(UTC)
        status = await admin.status()
        assert status["concurrency"] == 2
        assert status["config_reloaded_at"] == reloaded["reloaded_at"]
        assert status["pending_restart"] == ["worker.lease_s"]
        assert admin.worker.settings.worker_lease_s == 5.0  # restart-only: unchanged until a restart

        # A broken file is refused with a 400 and changes nothing.
        config.write_text("worker:\n  concurrency: 0\n", encoding="utf-8")
        refused = await admin.http.post("/v1/reload")
        assert assert_json_error(refused, 400) == "bad_request"
        assert "worker.concurrency" in refused.json()["error"]["message"]
        after = await admin.status()
        assert after["concurrency"] == 2
        assert after["config_reloaded_at"] == reloaded["reloaded_at"]
        # The worker still works.
        job = await admin.worker.client.enqueue("sys:noop", {})
        await admin.wait_job(job.id, "completed")



async def test_job_types_lists_what_the_daemon_published(stack: Stack) -> None:
    async def nothing(ctx: JobContext) -> None:
        return None

    registry = make_registry(HandlerSpec("admin:typed", nothing, "low", 4.5, 2))
    async with admin_worker(stack, registry=registry) as admin:
        listed = (await admin.get("/v1/job-types"))["job_types"]
        assert [t["job_type"] for t in listed] == registry.job_types()  # all, by name
        typed = next(t for t in listed if t["job_type"] == "admin:typed")
        published_at = datetime.fromisoformat(typed.pop("updated_at"))
        assert abs((published_at - datetime.now(UTC)).total_seconds()) < 60
        assert typed == {"job_type": "admin:typed", "queue": "low", "max_attempts": 2,
                         "timeout_s": 4.5, "published_by": admin.worker.worker_id}
        noop = next(t for t in listed if t["job_type"] == "sys:noop")
        assert (noop["queue"], noop["max_attempts"], noop["timeout_s"]) == ("default", 25, None)
        # A job of the type enqueued without options, through the daemon's own client.
        job = await admin.worker.client.enqueue("admin:typed", {}, queue=None)
        assert (job.queue, job.max_attempts) == ("low", 2)
