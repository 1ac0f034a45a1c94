"""/v1: a job's place in a workflow (added to the operator's ``GET /v1/jobs/<id>``) and
``GET /v1/batches/<id>`` (docs/workflows.md, "In the dashboard").

A dependency is listed with its status, not its result: a callback may wait on 1,000 members
whose results are up to 64 KiB each, and the dashboard reads the job every 2 seconds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from quart import Response, jsonify
from quart_trio import QuartTrio
from werkzeug.routing import BaseConverter

from gochatd.admin.http import ApiError, int_arg
from gochatd.model import MAX_ID
from gochatd.workflows.model import Batch

if TYPE_CHECKING:
    from gochatd.worker.control import Control

class BatchIdConverter(BaseConverter):
    """Any one path segment; ``batch_id_arg`` makes a bad one a 400 that says what is wrong."""

    regex = r"[^/]+"


def register(app: QuartTrio, daemon: Control) -> None:
    app.url_map.converters["batch_id"] = BatchIdConverter

    @app.get("/v1/batches/<batch_id:batch_id>")
    async def get_batch(batch_id: str) -> Response:
        batch = await daemon.store.get_batch(int_arg("id", batch_id, 0, 1, MAX_ID))
        if batch is None:
            raise ApiError(404, "not_found", f"batch {batch_id} not found")
        return jsonify(await batch_json(daemon, batch))


async def batch_json(daemon: Control, batch: Batch) -> dict[str, Any]:
    """``Batch.to_dict()`` and its callbacks with their status now (null: deleted, pruned)."""
    callbacks = []
    for on, job_id in (("on_success", batch.on_success_id), ("on_complete", batch.on_complete_id)):
        if job_id is None:
            continue
        job = await daemon.store.get_job(job_id)
        callbacks.append({"on": on, "job_id": job_id,
                          "status": None if job is None else job.status.value})
    return {**batch.to_dict(), "callbacks": callbacks}


async def links_json(daemon: Control, job_id: int) -> dict[str, Any]:
    """The fields the operator's job answer adds: ``waits_on``, ``batch_id`` (a member's),
    ``callback_of`` (the batch whose callback this job is) and ``depends_on``."""
    links = await daemon.store.job_links(job_id, with_results=False)
    if links is None:  # deleted between the two reads
        return {"waits_on": 0, "batch_id": None, "callback_of": None, "depends_on": []}
    return {
        "waits_on": links.waits_on, "batch_id": links.batch_id,
        "callback_of": links.callback_of,
        "depends_on": [{"job_id": d.job_id, "status": d.status.value,
                        "run_if_failed": d.run_if_failed, "resolved": d.resolved}
                       for d in links.dependencies],
    }


def workflow_paths(get: Any, json: Any, ref: Any) -> dict[str, Any]:
    """Built with openapi.py's own helpers (passed in), like the periodic part."""
    batch_id = {"name": "batch_id", "in": "path", "required": True,
                "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID}}
    return {"/v1/batches/{batch_id}": get(
        "One batch: its size, its members by status, its callbacks with their status",
        json(ref("Batch"), "the batch"), [batch_id])}


def workflow_schemas(statuses: list[str]) -> dict[str, Any]:
    """``Batch`` and the fields ``JobDetail`` adds (``JobLinks``)."""
    nullable_id = {"type": ["integer", "null"]}
    status = {"enum": statuses}
    dependency = {"type": "object", "additionalProperties": False,
                  "required": ["job_id", "status", "run_if_failed", "resolved"], "properties": {
                      "job_id": {"type": "integer"}, "status": status,
                      "run_if_failed": {"type": "boolean"},
                      "resolved": {"type": "boolean",
                                   "description": "the edge saw the dependency's final state"}}}
    callback = {"type": "object", "additionalProperties": False,
                "required": ["on", "job_id", "status"], "properties": {
                    "on": {"enum": ["on_success", "on_complete"]}, "job_id": {"type": "integer"},
                    "status": {"enum": [*statuses, None],
                               "description": "null: the callback was deleted or pruned"}}}
    return {
        "JobLinks": {"type": "object", "required": [
            "waits_on", "batch_id", "callback_of", "depends_on"], "properties": {
            "waits_on": {"type": "integer", "minimum": 0,
                         "description": "dependencies not yet finished (held while > 0)"},
            "batch_id": {**nullable_id, "description": "the batch this job is a member of"},
            "callback_of": {**nullable_id, "description": "the batch this job is a callback of"},
            "depends_on": {"type": "array", "items": dependency,
                           "description": "the jobs this one waits for, in id order"}}},
        "Batch": {"type": "object", "additionalProperties": False, "required": [
            "id", "tenant_id", "size", "on_success_id", "on_complete_id", "created_at",
            "counts", "finished", "done", "callbacks"], "properties": {
            "id": {"type": "integer"}, "tenant_id": {"type": "string"},
            "size": {"type": "integer"}, "on_success_id": nullable_id,
            "on_complete_id": nullable_id,
            "created_at": {"type": "string", "format": "date-time"},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"},
                       "description": "members by status now"},
            "finished": {"type": "integer", "description": "members completed, dead or "
                                                           "cancelled"},
            "done": {"type": "boolean"},
            "callbacks": {"type": "array", "items": callback}}},
    }
