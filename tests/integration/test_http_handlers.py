"""HTTP job handlers against a real local HTTP server that fails on demand: the request and
its signature, the outcome mapping (2xx, 408/409/429/5xx, timeouts, refused connections,
other 4xx), Retry-After, replies to the outbox, and which route a job type takes."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from gochatd.model import JobStatus
from gochatd.outbox.model import OutboxFilter
from gochatd.signing import SIGNATURE_HEADER, verify
from gochatd.worker.http_handlers import parse_http_handlers
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    make_registry,
    seconds,
    started_worker,
    wait_for_status,
)
from tests.support.harness import make_settings
from tests.support.http_endpoint import Answer, ScriptedEndpoint, scripted_endpoint

SECRET = "hook-secret-7f3a"
BODY_SECRET = b"internal stack trace with token=abc123"


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with scripted_endpoint() as ep:
        yield ep


def http_settings(url: str, routes: dict[str, dict[str, Any]], **overrides: Any) -> Any:
    return make_settings(url, handlers_http=parse_http_handlers(routes), **overrides)


def one_route(endpoint: ScriptedEndpoint, **entry: Any) -> dict[str, dict[str, Any]]:
    return {"automation:*": {"url": f"{endpoint.url}/jobs", "timeout_s": 2, **entry}}


async def test_a_2xx_completes_the_job_with_a_signed_request(
    pg_clean: str, endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOCHAT_TEST_HOOK_SECRET", SECRET)
    endpoint.default = Answer(204)
    settings = http_settings(pg_clean, one_route(endpoint, secret_env="GOCHAT_TEST_HOOK_SECRET"))
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue(
            "automation:rules_run", {"rule_id": 7}, tenant_id="acme", queue="automation"
        )
        done = await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)

    assert done.attempts == 1
    [request] = endpoint.requests
    assert request.path == "/jobs"
    assert request.headers["Content-Type"] == "application/json"
    assert request.json() == {
        "id": job.id, "job_type": "automation:rules_run", "queue": "automation",
        "tenant_id": "acme", "attempt": 1, "fence": 1, "payload": {"rule_id": 7},
    }
    signature = request.headers[SIGNATURE_HEADER]
    assert verify(SECRET.encode(), request.body, signature)
    assert not verify(b"another secret", request.body, signature)
    assert not verify(SECRET.encode(), request.body + b" ", signature)


async def test_without_secret_env_the_request_is_not_signed(
    sqlite_url: str, endpoint: ScriptedEndpoint
) -> None:
    async with started_worker(http_settings(sqlite_url, one_route(endpoint)),
                              registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:x", {})
        await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
    assert SIGNATURE_HEADER not in endpoint.requests[0].headers


async def test_replies_in_a_2xx_answer_reach_the_outbox_with_the_completion(
    pg_clean: str, endpoint: ScriptedEndpoint
) -> None:
    replies = [
        {"channel": "webhook", "to": "conv-1", "body": {"text": "hello"}, "dedupe_key": "m-1"},
        {"channel": "webhook", "to": "conv-2", "body": {"text": "bye"}, "dedupe_key": "m-2"},
    ]
    endpoint.default = Answer.json(200, {"replies": replies, "other": "ignored"})
    settings = http_settings(pg_clean, one_route(endpoint), outbox_enabled=False)
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:reply", {"conversation": 1},
                                              tenant_id="acme")
        await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
        rows = await run.worker.store.list_outbox(OutboxFilter(tenant_id="acme"))

    got = sorted((r.job_id, r.channel, r.recipient, r.body["text"], r.dedupe_key) for r in rows)
    assert got == [(job.id, "webhook", "conv-1", "hello", "m-1"),
                   (job.id, "webhook", "conv-2", "bye", "m-2")]


@pytest.mark.parametrize(
    "answer",
    [
        Answer.json(200, {"replies": [{"channel": "webhook", "to": "x", "body": "not an object",
                                       "dedupe_key": "k"}]}),
        Answer.json(200, {"replies": {"channel": "webhook"}}),
    ],
    ids=["body-not-object", "replies-not-list"],
)
async def test_malformed_replies_make_the_job_dead_and_write_none(
    pg_clean: str, endpoint: ScriptedEndpoint, answer: Answer
) -> None:
    endpoint.default = answer
    settings = http_settings(pg_clean, one_route(endpoint), outbox_enabled=False)
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:reply", {}, tenant_id="badreplies",
                                              max_attempts=5)
        dead = await wait_for_status(run.worker.store, job.id, JobStatus.DEAD)
        rows = await run.worker.store.list_outbox(OutboxFilter(tenant_id="badreplies"))
    assert dead.error_class == "http_bad_replies"
    assert dead.attempts == 1
    assert rows == []


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
async def test_retryable_statuses_are_retried(
    sqlite_url: str, endpoint: ScriptedEndpoint, status: int
) -> None:
    endpoint.script(Answer(status, BODY_SECRET), Answer(status, BODY_SECRET))
    endpoint.default = Answer(200)
    async with started_worker(http_settings(sqlite_url, one_route(endpoint)),
                              registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:flaky", {"n": 1}, max_attempts=5)
        done = await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
    assert done.attempts == 3
    assert [r.json()["attempt"] for r in endpoint.requests] == [1, 2, 3]
    # A completion clears the current error (the failures show in the retries' log lines).
    assert (done.error_class, done.last_error) == (None, None)


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422, 301])
async def test_other_statuses_make_the_job_dead_at_once(
    sqlite_url: str, endpoint: ScriptedEndpoint, status: int
) -> None:
    endpoint.default = Answer(status, BODY_SECRET, {"Location": "http://elsewhere/"})
    async with started_worker(http_settings(sqlite_url, one_route(endpoint)),
                              registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:bad", {}, max_attempts=5)
        dead = await wait_for_status(run.worker.store, job.id, JobStatus.DEAD)
    assert dead.attempts == 1
    assert len(endpoint.requests) == 1
    assert dead.error_class == f"http_{status}"
    assert dead.last_error is not None and "token" not in dead.last_error
    assert "elsewhere" not in dead.last_error and "127.0.0.1" not in dead.last_error


async def test_retry_after_sets_the_delay(
    pg_clean: str, endpoint: ScriptedEndpoint
) -> None:
    endpoint.script(Answer(429, b"", {"Retry-After": "3"}))
    settings = http_settings(pg_clean, one_route(endpoint), worker_retry_cap_s=30.0)
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:limited", {})
        retrying = await wait_for_status(run.worker.store, job.id, JobStatus.RETRYING)
        assert retrying.error_class == "http_429"
        # The delay is Retry-After's 3 s, not the 0.05 s backoff of these settings.
        assert 2.9 <= seconds(retrying.scheduled_at, retrying.updated_at) <= 3.1


async def test_retry_after_is_capped_by_retry_cap(
    sqlite_url: str, endpoint: ScriptedEndpoint
) -> None:
    endpoint.script(Answer(503, b"", {"Retry-After": "3600"}))
    settings = http_settings(sqlite_url, one_route(endpoint), worker_retry_cap_s=0.5)
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:down", {})
        done = await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
    assert done.attempts == 2


async def test_a_timeout_is_retried(
    sqlite_url: str, endpoint: ScriptedEndpoint
) -> None:
    endpoint.script(Answer(200, hold=True))
    settings = http_settings(sqlite_url, one_route(endpoint, timeout_s=0.3))
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:slow", {}, max_attempts=3)
        done = await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
        endpoint.release()
    assert done.attempts == 2
    assert done.error_class is None, "the first attempt's http_timeout is cleared"


async def test_a_refused_connection_is_retried_until_attempts_run_out(
    sqlite_url: str
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    routes = {"automation:*": {"url": f"http://user:pw@127.0.0.1:{port}/jobs", "timeout_s": 1}}
    async with started_worker(http_settings(sqlite_url, routes), registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:x", {}, max_attempts=2)
        dead = await wait_for_status(run.worker.store, job.id, JobStatus.DEAD)
    assert dead.attempts == 2
    assert dead.error_class == "http_connect_error"
    assert dead.last_error is not None and "pw" not in dead.last_error
    assert str(port) not in dead.last_error


async def test_exact_type_beats_prefix_and_python_handlers_beat_both(
    sqlite_url: str, endpoint: ScriptedEndpoint
) -> None:
    routes = {
        "automation:*": {"url": f"{endpoint.url}/any"},
        "automation:rules:*": {"url": f"{endpoint.url}/rules"},
        "automation:rules:run": {"url": f"{endpoint.url}/run"},
        "automation:python": {"url": f"{endpoint.url}/never"},
    }
    tracker = Tracker()
    registry = make_registry(HandlerSpec("automation:python", tracker.counting()))
    async with started_worker(http_settings(sqlite_url, routes), registry=registry) as run:
        ids = {}
        for job_type in ("automation:rules:run", "automation:rules:other", "automation:send",
                         "automation:python", "billing:charge"):
            ids[job_type] = (await run.worker.client.enqueue(job_type, {})).id
        for job_type in list(ids)[:4]:
            await wait_for_status(run.worker.store, ids[job_type], JobStatus.COMPLETED)
        # No route and no Python handler: never claimed (a later job is), it waits for a
        # daemon that can run it (docs/job-types.md).
        later = (await run.worker.client.enqueue("automation:send", {})).id
        await wait_for_status(run.worker.store, later, JobStatus.COMPLETED)
        unknown = await run.worker.store.get_job(ids["billing:charge"])

    by_type = {r.json()["job_type"]: r.path for r in endpoint.requests}
    assert by_type == {"automation:rules:run": "/run", "automation:rules:other": "/rules",
                       "automation:send": "/any"}
    assert tracker.executions[ids["automation:python"]] == 1
    assert unknown is not None and (unknown.status, unknown.attempts) == (JobStatus.QUEUED, 0)


async def test_a_bad_secret_env_stops_the_worker_from_starting(sqlite_url: str) -> None:
    from gochatd.errors import ConfigError
    from gochatd.worker.service import Worker

    settings = http_settings(sqlite_url, {"a:*": {"url": "http://127.0.0.1:9/",
                                                  "secret_env": "GOCHAT_TEST_UNSET_SECRET"}})
    with pytest.raises(ConfigError, match="GOCHAT_TEST_UNSET_SECRET is not set"):
        Worker(settings, registry=make_registry())


async def test_many_jobs_share_one_client(
    pg_clean: str, endpoint: ScriptedEndpoint
) -> None:
    """Twenty jobs through one route: all complete, each posted once, over the one client."""
    settings = http_settings(pg_clean, one_route(endpoint), worker_concurrency=10)
    async with started_worker(settings, registry=make_registry()) as run:
        jobs = [await run.worker.client.enqueue("automation:bulk", {"i": i}) for i in range(20)]
        for job in jobs:
            await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
        client = run.worker.http_handlers._client
    assert client is not None and client.is_closed  # closed with the worker
    assert sorted(json.loads(r.body)["payload"]["i"] for r in endpoint.requests) == list(range(20))
