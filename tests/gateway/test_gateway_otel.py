"""The gateway's enqueue as an OpenTelemetry producer span (docs/otel.md): the caller's
``traceparent`` (the header, or the body's field) is the span's parent, the job carries the
span's context, and the run is its child."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind

from gochatd.model import JobStatus
from tests.admin.helpers import Stack, admin_worker
from tests.gateway.helpers import KEY_A, TENANT_A, auth, gateway_overrides, job_body
from tests.integration.helpers import wait_for_status
from tests.support.otel_recording import Recorded, parent_of, record_spans, traceparent

HEADER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BODY = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    return record_spans(monkeypatch)


async def test_a_gateway_enqueue_continues_the_callers_trace(stack: Stack, recorded: Recorded) -> None:
    async with admin_worker(stack, **gateway_overrides()) as admin:
        headers = {**auth(KEY_A), "traceparent": HEADER}
        one = (await admin.post("/v1/jobs", 201, json=job_body(queue="high"), headers=headers))["job"]
        # The body's field wins over the header for its job; a malformed header is ignored.
        batch = await admin.post("/v1/jobs:batch", 200, headers={**auth(KEY_A), "traceparent": "nope"},
                                 json={"jobs": [job_body(queue="high", traceparent=BODY)]})
        [other] = [r["job"] for r in batch["results"]]
        for job in (one, other):
            await wait_for_status(admin.worker.store, job["id"], JobStatus.COMPLETED)
        runs = await recorded.wait_for("run ", SpanKind.CONSUMER, 2)
    producers = recorded.named("enqueue", SpanKind.PRODUCER)
    assert [p.name for p in producers] == ["enqueue high", "enqueue high"]
    assert [parent_of(p) for p in producers] == [HEADER, BODY]
    assert [(p.attributes or {})["gochatd.tenant_id"] for p in producers] == [TENANT_A, TENANT_A]
    assert [one["traceparent"], other["traceparent"]] == [traceparent(p) for p in producers]
    by_id = {(r.attributes or {})["messaging.message.id"]: r for r in runs}
    assert [parent_of(by_id[str(j["id"])]) for j in (one, other)] == [traceparent(p) for p in producers]
