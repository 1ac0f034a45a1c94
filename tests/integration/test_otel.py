"""OpenTelemetry traces (docs/otel.md) in one worker, with the SDK's in-memory exporter: a
producer span per enqueue (Client, SyncClient, batches), a consumer span per run that is the
child of the enqueue's context carried in the job's ``traceparent``, a client span per
HTTP-handler call and a span per outbox delivery, each sending its ``traceparent``
downstream. No payload, secret or URL credential reaches an attribute."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from gochatd.client.sync_client import SyncClient
from gochatd.errors import IdempotencyConflict
from gochatd.model import Job, JobStatus
from gochatd.new_job import NewJob
from gochatd.obs import otel
from gochatd.obs.otel_spans import Spans
from gochatd.outbox.model import OutboxStatus
from gochatd.worker.http_handlers import parse_http_handlers
from tests.integration.helpers import make_registry, started_worker, wait_for_status
from tests.integration.test_outbox_delivery import Replier, outbox_settings, wait_row
from tests.support.harness import make_settings
from tests.support.http_endpoint import Answer, ScriptedEndpoint, scripted_endpoint
from tests.support.otel_recording import Recorded, parent_of, record_spans, traceparent
from tests.support.webhook_receiver import WebhookReceiver

SECRET = "payload-secret-hunter2"
CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    return record_spans(monkeypatch)


def assert_no_secret(spans: list[ReadableSpan]) -> None:
    for span in spans:
        for value in (span.attributes or {}).values():
            assert SECRET not in str(value), (span.name, span.attributes)


def consumer_for(recorded: Recorded, job: Job) -> ReadableSpan:
    [span] = [s for s in recorded.named("run ", SpanKind.CONSUMER)
              if (s.attributes or {}).get("messaging.message.id") == str(job.id)]
    return span


async def test_a_run_is_the_child_of_its_enqueue(backend_url: str, recorded: Recorded) -> None:
    async with started_worker(make_settings(backend_url), registry=make_registry()) as run:
        job = await run.worker.client.enqueue("sys:noop", {"token": SECRET}, queue="high",
                                              tenant_id="acme")
        await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
        [consumer] = await recorded.wait_for("run ", SpanKind.CONSUMER)
    [producer] = recorded.named("enqueue", SpanKind.PRODUCER)
    assert producer.name == "enqueue high" and consumer.name == "run high"
    assert producer.parent is None  # no span was current: a new trace
    # The row carries the producer's context; the run continues it.
    assert job.traceparent == traceparent(producer) == parent_of(consumer)
    assert dict(producer.attributes or {}) == {
        "messaging.system": "gochatd", "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue", "messaging.destination.name": "high",
        "messaging.message.id": str(job.id), "gochatd.job.type": "sys:noop",
        "gochatd.tenant_id": "acme", "gochatd.job.created": True, "gochatd.jobs.created": 1,
    }
    assert dict(consumer.attributes or {}) == {
        "messaging.system": "gochatd", "messaging.operation.type": "process",
        "messaging.operation.name": "run", "messaging.destination.name": "high",
        "messaging.message.id": str(job.id), "gochatd.job.type": "sys:noop",
        "gochatd.job.attempt": 1, "gochatd.job.outcome": "completed",
    }
    assert consumer.status.status_code is StatusCode.UNSET
    assert_no_secret(recorded.all())


async def test_a_failed_run_says_its_outcome_and_error_class(
    backend_url: str, recorded: Recorded
) -> None:
    async with started_worker(make_settings(backend_url), registry=make_registry()) as run:
        client = run.worker.client
        retried = await client.enqueue("sys:fail", {"retryable": True, "message": SECRET},
                                       max_attempts=2)
        dead = await client.enqueue("sys:fail", {"retryable": False, "message": "no"})
        await wait_for_status(run.worker.store, retried.id, JobStatus.DEAD)
        await wait_for_status(run.worker.store, dead.id, JobStatus.DEAD)
        await recorded.wait_for("run ", SpanKind.CONSUMER, 3)
    runs = sorted(((s.attributes or {})["messaging.message.id"], (s.attributes or {})["gochatd.job.attempt"],
                   (s.attributes or {})["gochatd.job.outcome"], (s.attributes or {})["error.type"],
                   s.status.status_code) for s in recorded.named("run ", SpanKind.CONSUMER))
    assert runs == sorted([
        (str(retried.id), 1, "retry", "SysFailError", StatusCode.ERROR),
        (str(retried.id), 2, "dead", "SysFailError", StatusCode.ERROR),
        (str(dead.id), 1, "dead", "non_retryable", StatusCode.ERROR),
    ])
    # Every attempt continues the one enqueue's trace.
    [producer] = [s for s in recorded.named("enqueue", SpanKind.PRODUCER)
                  if (s.attributes or {})["messaging.message.id"] == str(retried.id)]
    assert {parent_of(s) for s in recorded.named("run ", SpanKind.CONSUMER)
            if (s.attributes or {})["messaging.message.id"] == str(retried.id)} == {traceparent(producer)}
    assert_no_secret(recorded.all())


async def test_a_callers_traceparent_is_the_enqueues_parent(
    sqlite_url: str, recorded: Recorded
) -> None:
    async with started_worker(make_settings(sqlite_url), registry=make_registry()) as run:
        job = await run.worker.client.enqueue("sys:noop", traceparent=CALLER)
        await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
        consumer = (await recorded.wait_for("run ", SpanKind.CONSUMER))[0]
    [producer] = recorded.named("enqueue", SpanKind.PRODUCER)
    assert parent_of(producer) == CALLER  # same trace, the caller's span as parent
    assert job.traceparent == traceparent(producer) == parent_of(consumer)
    assert job.traceparent is not None and job.traceparent.split("-")[1] == CALLER.split("-")[1]


async def test_a_batch_is_one_producer_span_and_each_run_its_child(
    backend_url: str, recorded: Recorded
) -> None:
    async with started_worker(make_settings(backend_url), registry=make_registry()) as run:
        results = await run.worker.client.enqueue_many(
            [NewJob("sys:noop", {"n": n}, queue="low") for n in range(3)]
            + [NewJob("sys:noop", {"n": 3}, queue="low", traceparent=CALLER)])
        for result in results:
            await wait_for_status(run.worker.store, result.job.id, JobStatus.COMPLETED)
        await recorded.wait_for("run ", SpanKind.CONSUMER, 4)
    [batch] = recorded.named("enqueue", SpanKind.PRODUCER)
    assert batch.name == "enqueue low"
    assert (batch.attributes or {})["messaging.batch.message_count"] == 4
    assert (batch.attributes or {})["gochatd.jobs.created"] == 4
    jobs = [r.job for r in results]
    assert [j.traceparent for j in jobs] == [traceparent(batch)] * 3 + [CALLER]  # its own kept
    assert [parent_of(consumer_for(recorded, j)) for j in jobs] == [traceparent(batch)] * 3 + [CALLER]


async def test_a_sync_client_enqueue_is_a_producer_span(
    backend_url: str, recorded: Recorded
) -> None:
    async with started_worker(make_settings(backend_url), registry=make_registry()) as run:

        def produce() -> list[Job]:
            with SyncClient(backend_url) as client:
                one = client.enqueue("sys:noop", {"secret": SECRET}, queue="low")
                [many] = client.enqueue_many([NewJob("sys:noop", queue="low")])
                return [one, many.job]

        jobs = await trio.to_thread.run_sync(produce)
        for job in jobs:
            await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED, timeout_s=15)
        await recorded.wait_for("run ", SpanKind.CONSUMER, 2)
    producers = recorded.named("enqueue", SpanKind.PRODUCER)
    assert [p.name for p in producers] == ["enqueue low", "enqueue low"]
    assert [j.traceparent for j in jobs] == [traceparent(p) for p in producers]
    assert [parent_of(consumer_for(recorded, j)) for j in jobs] == [j.traceparent for j in jobs]
    assert_no_secret(recorded.all())


async def test_chains_batches_and_dependents_are_producer_spans(
    backend_url: str, recorded: Recorded
) -> None:
    # A workflow write is one producer span; every job of it carries that span's context,
    # so a link, a member and a callback each run as its child, whenever they are released.
    async with started_worker(make_settings(backend_url), registry=make_registry()) as run:
        client = run.worker.client
        chain = await client.chain([NewJob("sys:noop", {"n": n}, queue="low") for n in range(2)])
        batch = await client.batch([NewJob("sys:noop", queue="low")],
                                   on_complete=NewJob("sys:noop", queue="low"))
        assert batch.on_complete is not None

        def produce() -> Job:
            with SyncClient(backend_url) as sync:
                return sync.enqueue("sys:noop", {"secret": SECRET}, queue="low",
                                    depends_on=[chain[-1].id])

        dependent = await trio.to_thread.run_sync(produce)
        jobs = [*chain, *batch.jobs, batch.on_complete, dependent]
        for job in jobs:
            await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED, timeout_s=15)
        await recorded.wait_for("run ", SpanKind.CONSUMER, len(jobs))
    producers = recorded.named("enqueue", SpanKind.PRODUCER)
    assert [p.name for p in producers] == ["enqueue low"] * 3
    assert [(p.attributes or {})["messaging.batch.message_count"] for p in producers] == [2, 2, 1]
    spans_of = [producers[0]] * 2 + [producers[1]] * 2 + [producers[2]]
    assert [j.traceparent for j in jobs] == [traceparent(p) for p in spans_of]
    assert [parent_of(consumer_for(recorded, j)) for j in jobs] == [j.traceparent for j in jobs]
    assert_no_secret(recorded.all())


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with scripted_endpoint() as ep:
        yield ep


async def test_an_http_handler_call_is_a_client_span_sent_downstream(
    backend_url: str, endpoint: ScriptedEndpoint, recorded: Recorded
) -> None:
    endpoint.script(Answer(503))
    endpoint.default = Answer(204)
    routes = {"automation:*": {"url": f"{endpoint.url}/jobs?token={SECRET}", "timeout_s": 2}}
    settings = make_settings(backend_url, handlers_http=parse_http_handlers(routes))
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue("automation:rules_run", {"rule": 1}, max_attempts=3)
        await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
        calls = await recorded.wait_for("POST", SpanKind.CLIENT, 2)
        await recorded.wait_for("run ", SpanKind.CONSUMER, 2)
    runs = {(s.attributes or {})["gochatd.job.attempt"]: s for s in recorded.named("run ", SpanKind.CONSUMER)}
    sent = [r.headers["traceparent"] for r in endpoint.requests]
    # Each call's own span went downstream; each call is the child of its attempt's run.
    assert sent == [traceparent(c) for c in calls]
    assert [parent_of(c) for c in calls] == [traceparent(runs[1]), traceparent(runs[2])]
    assert [(c.attributes or {})["http.response.status_code"] for c in calls] == [503, 204]
    assert [c.status.status_code for c in calls] == [StatusCode.ERROR, StatusCode.UNSET]
    assert (calls[0].attributes or {})["server.address"] == "127.0.0.1"
    assert (calls[0].attributes or {})["url.path"] == "/jobs"
    assert_no_secret(recorded.all())


async def test_an_outbox_delivery_is_a_span_sent_downstream(
    backend_url: str, receiver: WebhookReceiver, recorded: Recorded
) -> None:
    from tests.support.webhook_receiver import Answer as HookAnswer

    receiver.script = [HookAnswer(500)]
    replier = Replier()
    async with started_worker(outbox_settings(backend_url, receiver),
                              registry=replier.registry()) as run:
        job = await run.worker.client.enqueue("test:reply", {"key": "otel:1", "text": SECRET})
        sent = await wait_row(run.worker.store, "otel:1", OutboxStatus.SENT)
        deliveries = await recorded.wait_for("deliver ", SpanKind.PRODUCER, 2)
    assert [d.name for d in deliveries] == ["deliver wa", "deliver wa"]
    attributes: list[dict[str, Any]] = [dict(d.attributes or {}) for d in deliveries]
    assert [(a["messaging.message.id"], a["gochatd.outbox.attempt"], a["gochatd.outbox.outcome"],
             a["gochatd.job.id"]) for a in attributes] == [
        (str(sent.id), 1, "retry", job.id), (str(sent.id), 2, "sent", job.id)]
    assert receiver.traceparents == [traceparent(d) for d in deliveries]
    assert_no_secret(recorded.all())


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookReceiver]:
    from tests.integration.test_outbox_delivery import SECRET as HOOK_SECRET
    from tests.integration.test_outbox_delivery import SECRET_ENV

    monkeypatch.setenv(SECRET_ENV, HOOK_SECRET)
    server = WebhookReceiver(HOOK_SECRET.encode()).start()
    yield server
    server.stop()


async def test_without_a_tracer_provider_jobs_keep_the_callers_traceparent(
    backend_url: str, endpoint: ScriptedEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API installed but no provider configured (this process sets none): no span is
    started, a job stores what its caller gave, and an HTTP handler receives it."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    monkeypatch.setattr(otel, "SPANS", Spans())
    endpoint.default = Answer(204)
    routes = {"automation:*": {"url": f"{endpoint.url}/jobs", "timeout_s": 2}}
    settings = make_settings(backend_url, handlers_http=parse_http_handlers(routes))
    async with started_worker(settings, registry=make_registry()) as run:
        given = await run.worker.client.enqueue("automation:x", traceparent=CALLER)
        bare = await run.worker.client.enqueue("sys:noop")
        [batched] = await run.worker.client.enqueue_many([NewJob("sys:noop")])
        for job in (given, bare, batched.job):
            await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
    assert (given.traceparent, bare.traceparent, batched.job.traceparent) == (CALLER, None, None)
    assert [r.headers.get("traceparent") for r in endpoint.requests] == [CALLER]


async def test_a_failed_enqueue_names_the_error_class_only(sqlite_url: str, recorded: Recorded) -> None:
    async with started_worker(make_settings(sqlite_url), registry=make_registry()) as run:
        await run.worker.client.enqueue("sys:noop", {"a": SECRET}, idempotency_key="k1", queue="low")
        with pytest.raises(IdempotencyConflict):
            await run.worker.client.enqueue("sys:noop", {"b": SECRET}, idempotency_key="k1", queue="low")
    ok, failed = recorded.named("enqueue", SpanKind.PRODUCER)
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "IdempotencyConflict"
    assert not failed.events  # no exception event: its text stays out of the trace
    assert_no_secret(recorded.all())
