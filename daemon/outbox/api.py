"""/v1/outbox: list, show and retry reply outbox rows (the sender is outbox/loop.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quart import Response, jsonify, request
from quart_trio import QuartTrio

from gochatd.admin.http import (
    MAX_PAGE,
    ApiError,
    cursor_arg,
    int_arg,
    job_id_arg,
    read_body,
    storable,
    text_arg,
)
from gochatd.outbox.model import OutboxFilter, OutboxStatus

if TYPE_CHECKING:
    from gochatd.worker.control import Control


def _status_arg(raw: str | None) -> OutboxStatus | None:
    if raw is None or raw == "":
        return None
    try:
        return OutboxStatus(raw)
    except ValueError:
        allowed = ", ".join(s.value for s in OutboxStatus)
        raise ApiError(400, "bad_request", f"status must be one of: {allowed}") from None


def register(app: QuartTrio, daemon: Control) -> None:
    @app.get("/v1/outbox")
    async def list_outbox() -> Response:
        args = request.args
        flt = OutboxFilter(
            status=_status_arg(args.get("status")),
            tenant_id=text_arg("tenant", args.get("tenant")),
            channel=text_arg("channel", args.get("channel")),
            limit=int_arg("limit", args.get("limit"), 50, 1, MAX_PAGE),
            after_id=cursor_arg(args.get("cursor")),
        )
        rows = await daemon.store.list_outbox(flt) if storable(flt.tenant_id, flt.channel) else []
        cursor = str(rows[-1].id) if len(rows) == flt.limit else None
        return jsonify({"messages": [r.to_dict() for r in rows], "next_cursor": cursor})

    @app.get("/v1/outbox/<message_id>")
    async def get_outbox(message_id: str) -> Response:
        row = await daemon.store.get_outbox(job_id_arg(message_id))
        if row is None:
            raise ApiError(404, "not_found", f"outbox message {message_id} not found")
        return jsonify(row.to_dict())

    @app.post("/v1/outbox/<message_id>/retry")
    async def retry_outbox(message_id: str) -> Response:
        await read_body(set())
        ident = job_id_arg(message_id)
        row = await daemon.store.requeue_outbox(ident)
        if row is None:
            current = await daemon.store.get_outbox(ident)
            if current is None:
                raise ApiError(404, "not_found", f"outbox message {ident} not found")
            raise ApiError(409, "invalid_transition",
                           f"cannot retry outbox message {ident}: it is {current.status}, not dead")
        daemon.log.info("outbox_requeued", outbox_id=ident)
        daemon.outbox_requeued()
        return jsonify(row.to_dict())
