"""The gateway's dependent jobs, chains and batches (docs/workflows.md, docs/gateway.md):
``depends_on`` on ``POST /v1/jobs``, ``POST /v1/chains`` and ``POST /v1/batches``.

As ``POST /v1/jobs:batch``: the tenant is the key's, every job is checked before anything
is written (400 naming the first bad one), the jobs are charged to the tenant's rate limit
(429) and a write larger than its burst is refused (400 ``over_burst``). Each write is one
transaction (workflows/store.py). A dependency that is not the tenant's job, or no job at
all, is one answer: 404 ``dependency_not_found``, so another tenant's ids are not told apart
from missing ones.

Chains and batches take no ``Idempotency-Key`` (400): a replayed workflow would not be the
same batch, and a retried request must not silently start a second one. Their jobs take no
``idempotency_key`` for the same reason, and a batch's members no ``unique_*`` (a pending
duplicate answered instead would not be the batch's member).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quart import Response, jsonify, request
from quart_trio import QuartTrio

from gochatd.admin.http import ApiError
from gochatd.client import workflows
from gochatd.errors import JobNotFound
from gochatd.gateway.requests import (
    MAX_BATCH,
    MAX_BATCH_MEMBERS,
    MEMBER_FIELDS,
    WAITING_FIELDS,
    check_fields,
    counted_as_invalid,
    parse_item,
    parse_jobs,
)
from gochatd.model import EnqueueRequest
from gochatd.workflows.model import Workflow, WorkflowResult

if TYPE_CHECKING:
    from gochatd.gateway.gateway import Gateway
    from gochatd.worker.control import Control

BATCH_FIELDS = frozenset({"jobs", "on_success", "on_complete"})


def register_workflows(app: QuartTrio, daemon: Control) -> None:
    from gochatd.gateway.api import _caller, _json_body

    gateway = daemon.gateway
    assert gateway is not None
    max_payload = daemon.settings.worker_max_payload_bytes

    async def read(shape: str, fields: frozenset[str]) -> tuple[str, dict[str, Any]] | Response:
        tenant = _caller(gateway)
        if isinstance(tenant, Response):
            return tenant
        if request.headers.get("Idempotency-Key") is not None:
            raise ApiError(400, "bad_request", "Idempotency-Key: not taken by chains and "
                           "batches; a retried request would start a second one")
        body = await _json_body()
        with counted_as_invalid(gateway, tenant):
            return tenant, check_fields(body, fields, shape)

    @app.post("/v1/chains")
    async def enqueue_chain() -> Response:
        got = await read('{"jobs": [...]}', frozenset({"jobs"}))
        if isinstance(got, Response):
            return got
        tenant, body = got
        with counted_as_invalid(gateway, tenant):
            jobs = parse_jobs(body, "jobs", tenant_id=tenant, max_payload_bytes=max_payload,
                              allowed=WAITING_FIELDS, most=MAX_BATCH)
        written = await write(daemon, gateway, tenant, workflows.chain_of, jobs)
        if isinstance(written, Response):
            return written
        return _created({"jobs": [r.job.to_dict() for r in written[1].results]})

    @app.post("/v1/batches")
    async def enqueue_batch_workflow() -> Response:
        got = await read('{"jobs": [...], "on_success": {...}, "on_complete": {...}}',
                         BATCH_FIELDS)
        if isinstance(got, Response):
            return got
        tenant, body = got
        with counted_as_invalid(gateway, tenant):
            members = parse_jobs(body, "jobs", tenant_id=tenant, max_payload_bytes=max_payload,
                                 allowed=MEMBER_FIELDS, most=MAX_BATCH_MEMBERS)
            callbacks = [None if body.get(name) is None else parse_item(
                body[name], name, tenant_id=tenant, max_payload_bytes=max_payload,
                allowed=WAITING_FIELDS) for name in ("on_success", "on_complete")]
        return await _batch(daemon, gateway, tenant, members, callbacks)


async def _batch(daemon: Control, gateway: Gateway, tenant: str, members: list[EnqueueRequest],
                 callbacks: list[EnqueueRequest | None]) -> Response:
    count = len(members)

    def build(requests: list[EnqueueRequest]) -> Workflow:
        cbs = iter(requests[count:])
        success, complete = (None if c is None else next(cbs) for c in callbacks)
        return workflows.batch_of(requests[:count], success, complete)

    jobs = members + [c for c in callbacks if c is not None]
    written = await write(daemon, gateway, tenant, build, jobs)
    if isinstance(written, Response):
        return written
    batch = workflows.enqueued_batch(*written)
    return _created({
        "batch_id": batch.id, "jobs": [j.to_dict() for j in batch.jobs],
        "on_success": None if batch.on_success is None else batch.on_success.to_dict(),
        "on_complete": None if batch.on_complete is None else batch.on_complete.to_dict(),
    })


async def write(daemon: Control, gateway: Gateway, tenant: str, build: Any,
                jobs: list[EnqueueRequest]) -> tuple[Workflow, WorkflowResult] | Response:
    """Checked (``build``: the requests -> the Workflow, raising InvalidJob), charged to the
    tenant's rate limit, then written in one transaction."""
    from gochatd.gateway.api import _new_job, _traceparent, admit_jobs

    traceparent = _traceparent()
    client = daemon.client
    with counted_as_invalid(gateway, tenant):
        # The client's checks again, and its mark for the XADD after commit.
        flow: Workflow = build(client._batch([_new_job(j, traceparent) for j in jobs]))
    refused = await admit_jobs(gateway, tenant, len(jobs))
    if refused is not None:
        return refused
    try:
        written = await client._workflow(flow)  # one transaction, then the XADD
    except JobNotFound as exc:
        gateway.count(tenant, "invalid")
        raise ApiError(404, "dependency_not_found", f"depends_on: {exc}") from None
    created = sum(1 for r in written.results if r.created)
    if created:
        gateway.count(tenant, "created", created)
    if len(written.results) > created:
        gateway.count(tenant, "replayed", len(written.results) - created)
    return flow, written


def _created(body: dict[str, Any]) -> Response:
    response = jsonify(body)
    response.status_code = 201
    return response
