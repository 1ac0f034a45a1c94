"""The gateway's routes: ``POST /v1/jobs`` and ``POST /v1/jobs:batch``.

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

from gochatd.admin.app import ApiError, error_response
from gochatd.errors import IdempotencyConflict, InvalidJob
from gochatd.gateway.ratelimit import Decision
from gochatd.gateway.requests import IDEMPOTENCY_KEY_RE, parse_batch, parse_job
from gochatd.model import EnqueueRequest, EnqueueResult
from gochatd.new_job import NewJob

if TYPE_CHECKING:
    from gochatd.control import Control
    from gochatd.gateway.gateway import Gateway

REALM = 'Bearer realm="gochatd-gateway"'


def register(app: QuartTrio, daemon: Control) -> None:
    gateway = daemon.gateway
    assert gateway is not None

    @app.post("/v1/jobs")
    async def enqueue_job() -> Response:
        tenant = _caller(gateway)
        if isinstance(tenant, Response):
            return tenant
        body = await _json_body()
        idempotency_key = _idempotency_key()
        try:
            job = parse_job(body, tenant_id=tenant, idempotency_key=idempotency_key,
                            max_payload_bytes=daemon.settings.worker_max_payload_bytes)
        except InvalidJob as exc:
            gateway.count(tenant, "invalid")
            raise ApiError(400, "bad_request", str(exc)) from None
        decision = await gateway.admit(tenant, 1)
        if not decision.admitted:
            return _rate_limited(decision)
        try:
            [result] = await daemon.client.enqueue_many([_new_job(job)])
        except IdempotencyConflict as exc:
            gateway.count(tenant, "conflict")
            raise ApiError(409, "idempotency_conflict",
                           f"Idempotency-Key is already used by job {exc.existing_id} with a "
                           "different job type or payload") from None
        gateway.count(tenant, "created" if result.created else "replayed")
        response = jsonify({"job": result.job.to_dict()})
        response.status_code = 201 if result.created else 200
        if not result.created:
            response.headers["Idempotent-Replay"] = "true"
        return response

    @app.post("/v1/jobs:batch")
    async def enqueue_batch() -> Response:
        tenant = _caller(gateway)
        if isinstance(tenant, Response):
            return tenant
        body = await _json_body()
        try:
            jobs = parse_batch(body, tenant_id=tenant,
                               max_payload_bytes=daemon.settings.worker_max_payload_bytes)
        except InvalidJob as exc:
            gateway.count(tenant, "invalid")
            raise ApiError(400, "bad_request", str(exc)) from None
        rate, burst = gateway.limits(tenant)
        if rate > 0 and len(jobs) > burst:
            raise ApiError(400, "over_burst", f"a batch of {len(jobs)} jobs is larger than "
                           f"this tenant's burst ({burst}); send smaller batches")
        decision = await gateway.admit(tenant, len(jobs))
        if not decision.admitted:
            return _rate_limited(decision)
        results = await daemon.client.enqueue_many([_new_job(j) for j in jobs],
                                                   raise_on_conflict=False)
        return _batch_response(gateway, tenant, results)


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


def _new_job(job: EnqueueRequest) -> NewJob:
    return NewJob(
        job_type=job.job_type, payload=job.payload, queue=job.queue, tenant_id=job.tenant_id,
        idempotency_key=job.idempotency_key, scheduled_at=job.scheduled_at,
        delay_s=job.delay_s, max_attempts=job.max_attempts, priority=job.priority,
        traceparent=job.traceparent, unique_key=job.unique_key, unique_for_s=job.unique_for_s,
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
