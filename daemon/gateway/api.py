"""The gateway's routes: ``POST /v1/jobs`` and ``POST /v1/jobs:batch`` (and, in
gateway/workflows.py, ``depends_on``, ``POST /v1/chains`` and ``POST /v1/batches``).

Each request: the tenant API key (``Authorization: Bearer``) names the tenant, or 401 ->
the body is validated (all of a batch before anything is written), or 400/413 -> the
tenant's rate limit admits the jobs, or 429 with ``Retry-After`` -> one enqueue (a batch is
one INSERT). ``Idempotency-Key`` becomes the job's idempotency key within the tenant: a
repeat with the same job answers 200 with the existing job and ``Idempotent-Replay: true``,
a different job 409.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from quart import Response, jsonify, request
from quart_trio import QuartTrio

from gochatd.admin.http import ApiError, error_response
from gochatd.client import workflows
from gochatd.errors import IdempotencyConflict
from gochatd.gateway.ratelimit import Decision
from gochatd.gateway.requests import (
    IDEMPOTENCY_KEY_RE,
    LINKED_JOB_FIELDS,
    TRACEPARENT,
    counted_as_invalid,
    parse_batch,
    parse_job,
    parse_links,
)
from gochatd.gateway.workflows import register_workflows, write
from gochatd.model import EnqueueRequest, EnqueueResult
from gochatd.new_job import NewJob

if TYPE_CHECKING:
    from gochatd.gateway.gateway import Gateway
    from gochatd.worker.control import Control

REALM = 'Bearer realm="gochatd-gateway"'


def register(app: QuartTrio, daemon: Control) -> None:
    gateway = daemon.gateway
    assert gateway is not None

    @app.post("/v1/jobs")
    async def enqueue_job() -> Response:
        tenant = _caller(gateway)
        if isinstance(tenant, Response):
            return tenant
        return await _enqueue_one(daemon, gateway, tenant, await _json_body())

    @app.post("/v1/jobs:batch")
    async def enqueue_batch() -> Response:
        tenant = _caller(gateway)
        if isinstance(tenant, Response):
            return tenant
        body = await _json_body()
        with counted_as_invalid(gateway, tenant):
            jobs = parse_batch(body, tenant_id=tenant,
                               max_payload_bytes=daemon.settings.worker_max_payload_bytes)
        refused = await admit_jobs(gateway, tenant, len(jobs))
        if refused is not None:
            return refused
        traceparent = _traceparent()
        results = await daemon.client.enqueue_many([_new_job(j, traceparent) for j in jobs],
                                                   raise_on_conflict=False)
        return _batch_response(gateway, tenant, results)

    register_workflows(app, daemon)  # POST /v1/chains, POST /v1/batches


async def _enqueue_one(daemon: Control, gateway: Gateway, tenant: str, body: Any) -> Response:
    """POST /v1/jobs: one job, which may wait for others (``depends_on``)."""
    idempotency_key = _idempotency_key()
    with counted_as_invalid(gateway, tenant):
        job = parse_job(body, tenant_id=tenant, idempotency_key=idempotency_key,
                        max_payload_bytes=daemon.settings.worker_max_payload_bytes,
                        allowed=LINKED_JOB_FIELDS)
        depends_on, run_if_failed = parse_links(body)
    try:
        if depends_on:
            written = await write(daemon, gateway, tenant, lambda requests: workflows.dependent(
                requests[0], depends_on, run_if_failed), [job])
            if isinstance(written, Response):
                return written
            result = written[1].results[0]
        else:
            decision = await gateway.admit(tenant, 1)
            if not decision.admitted:
                return _rate_limited(decision)
            [result] = await daemon.client.enqueue_many([_new_job(job, _traceparent())])
            gateway.count(tenant, "created" if result.created else "replayed")
    except IdempotencyConflict as exc:
        gateway.count(tenant, "conflict")
        raise ApiError(409, "idempotency_conflict",
                       f"Idempotency-Key is already used by job {exc.existing_id} with a "
                       "different job type or payload") from None
    response = jsonify({"job": result.job.to_dict()})
    response.status_code = 201 if result.created else 200
    if not result.created:
        response.headers["Idempotent-Replay"] = "true"
    return response


def _batch_response(gateway: Gateway, tenant: str, results: list[EnqueueResult]) -> Response:
    items = [_item(i, r) for i, r in enumerate(results)]
    for outcome in ("created", "replayed", "conflict"):
        n = sum(1 for item in items if item["outcome"] == outcome)
        if n:
            gateway.count(tenant, outcome, n)
    return jsonify({
        "results": items,
        "created": sum(1 for r in results if r.created),
        "replayed": sum(1 for r in results if not r.created and not r.conflict),
        "conflicts": sum(1 for r in results if r.conflict),
    })


def _caller(gateway: Gateway) -> str | Response:
    """The calling tenant, or the refusal (a cross-site page, no valid key)."""
    refused = _cross_origin()
    if refused is not None:
        return refused
    tenant = _tenant(gateway)
    return _unauthorized() if tenant is None else tenant


def _idempotency_key() -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is not None and not (len(key) <= 512 and IDEMPOTENCY_KEY_RE.match(key)):
        raise ApiError(400, "bad_request", "Idempotency-Key: expected 1-512 visible "
                       "ASCII characters (single spaces inside allowed)")
    return key


def _tenant(gateway: Gateway) -> str | None:
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return gateway.keys.tenant_for(presented.strip())


def _cross_origin() -> Response | None:
    """Like the admin API: a page on another site may not submit jobs from a browser."""
    origin = request.headers.get("Origin")
    if origin and urlsplit(origin).netloc.lower() != request.host.lower():
        return error_response(403, "cross_origin", "cross-origin requests are refused")
    return None


def _unauthorized() -> Response:
    response = error_response(401, "unauthorized", "a valid tenant API key is required "
                              "(Authorization: Bearer <key>)")
    response.headers["WWW-Authenticate"] = REALM
    return response


async def admit_jobs(gateway: Gateway, tenant: str, count: int) -> Response | None:
    """The tenant's rate limit charged ``count`` jobs written at once: None when admitted,
    else the 429 to answer; more jobs than the burst can ever hold is a 400."""
    rate, burst = gateway.limits(tenant)
    if rate > 0 and count > burst:
        raise ApiError(400, "over_burst", f"{count} jobs at once are more than this tenant's "
                       f"burst ({burst}); send fewer")
    decision = await gateway.admit(tenant, count)
    return None if decision.admitted else _rate_limited(decision)


def _rate_limited(decision: Decision) -> Response:
    response = error_response(429, "rate_limited", "this tenant's rate limit is exhausted; "
                              "retry after Retry-After seconds")
    response.headers["Retry-After"] = decision.retry_after_header
    return response


async def _json_body() -> Any:
    """The decoded body; every malformed body is a 400 (oversize: 413 from Quart)."""
    raw = await request.get_data(cache=True, as_text=False)
    if not raw.strip():
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        raise ApiError(400, "bad_json", "the body is not valid JSON") from None


def _traceparent() -> str | None:
    """The request's W3C ``traceparent`` header, for the jobs whose body names none (a
    malformed header is ignored, as W3C Trace Context asks)."""
    header = request.headers.get("traceparent", "").strip()
    return header if TRACEPARENT.fullmatch(header) else None


def _new_job(job: EnqueueRequest, traceparent: str | None) -> NewJob:
    return NewJob(
        job_type=job.job_type, payload=job.payload, queue=job.queue, tenant_id=job.tenant_id,
        idempotency_key=job.idempotency_key, scheduled_at=job.scheduled_at,
        delay_s=job.delay_s, max_attempts=job.max_attempts, priority=job.priority,
        traceparent=job.traceparent or traceparent, unique_key=job.unique_key,
        unique_for_s=job.unique_for_s,
    )


def _item(index: int, result: EnqueueResult) -> dict[str, Any]:
    if result.conflict:
        return {"index": index, "outcome": "conflict", "status": 409,
                "error": {"code": "idempotency_conflict",
                          "message": f"idempotency_key is already used by job {result.job.id} "
                                     "with a different job type or payload"}}
    created = result.created
    return {"index": index, "outcome": "created" if created else "replayed",
            "status": 201 if created else 200, "job": result.job.to_dict()}
