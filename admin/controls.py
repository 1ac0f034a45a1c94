"""/v1 job controls: delete, run now, discard one job, and any control in bulk
(docs/operations.md, "Job controls"). Each runs through the daemon's client
(client/job_controls.py): a guarded write, then one ``job_control`` audit line whose actor is
``admin <peer address>`` (never the token)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quart import Response, jsonify, request
from quart_trio import QuartTrio

from gochatd.admin.api import job_json
from gochatd.admin.http import (
    ApiError,
    job_id_arg,
    queue_arg,
    read_body,
    status_arg,
    storable,
    text_arg,
)
from gochatd.client import job_controls
from gochatd.client.job_controls import admin_actor
from gochatd.client.validation import MAX_BULK_IDS, validate_selection
from gochatd.model import MAX_ID, BulkResult, JobAction, JobSelection

if TYPE_CHECKING:
    from gochatd.worker.control import Control

BULK_FIELDS = {"action", "ids", "status", "queue", "job_type", "tenant_id"}


def actor() -> str:
    return admin_actor(request.remote_addr)


def register(app: QuartTrio, daemon: Control) -> None:
    @app.delete("/v1/jobs/<job_id:job_id>")
    async def delete_job(job_id: str) -> Response:
        await read_body(set())
        job = await daemon.client.delete(job_id_arg(job_id), actor=actor())
        return jsonify({"id": job.id, "deleted": True})

    @app.post("/v1/jobs/<job_id:job_id>/run-now")
    async def run_job_now(job_id: str) -> Response:
        await read_body(set())
        job = await daemon.client.run_now(job_id_arg(job_id), actor=actor())
        daemon.new_work()  # this process's scheduler or poller takes it at once
        return jsonify(job_json(job))

    @app.post("/v1/jobs/<job_id:job_id>/discard")
    async def discard_job(job_id: str) -> Response:
        await read_body(set())
        job = await daemon.client.discard(job_id_arg(job_id), actor=actor())
        return jsonify(job_json(job))

    @app.post("/v1/jobs/bulk")
    async def control_jobs() -> Response:
        body = await read_body(BULK_FIELDS)
        action = _action_arg(body.get("action"))
        selection = validate_selection(JobSelection(
            ids=_ids_arg(body.get("ids")), status=status_arg(body.get("status")),
            queue=queue_arg(body.get("queue")), job_type=text_arg("job_type", body.get("job_type")),
            tenant_id=text_arg("tenant_id", body.get("tenant_id")),
        ), filter_rules=False)
        if not storable(selection.job_type, selection.tenant_id):
            return jsonify(BulkResult(action, 0, 0).to_dict())  # no stored job can match
        result = await job_controls.bulk(daemon.store, action, selection, actor=actor(),
                                         filter_rules=False)
        if result.changed and action in (JobAction.RETRY, JobAction.RUN_NOW):
            daemon.new_work()
        return jsonify(result.to_dict())


def _action_arg(raw: Any) -> JobAction:
    try:
        return JobAction(raw)
    except ValueError:
        allowed = ", ".join(a.value for a in JobAction)
        raise ApiError(400, "bad_request", f"action must be one of: {allowed}") from None


def _ids_arg(raw: Any) -> tuple[int, ...] | None:
    """A JSON array of 1..MAX_BULK_IDS job ids (``7.0`` is an integer too, as JSON Schema
    says); null means none."""
    if raw is None:
        return None
    problem = f"ids must be an array of 1 to {MAX_BULK_IDS} job ids (integers in 1..{MAX_ID})"
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_BULK_IDS:
        raise ApiError(400, "bad_request", problem)
    ids = []
    for value in raw:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
            raise ApiError(400, "bad_request", problem)
        ids.append(value)
    return tuple(ids)
