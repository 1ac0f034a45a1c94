"""/v1/outbox: list, show and retry reply outbox rows (the sender is outbox/loop.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quart import Response, jsonify, request
from quart_trio import QuartTrio

from gochatd.admin.api import (
    MAX_PAGE,
    _body,
    _cursor_arg,
    _int_arg,
    _job_id,
    _storable,
    _text_arg,
)
from gochatd.admin.app import ApiError
from gochatd.outbox.model import OutboxFilter, OutboxStatus

if TYPE_CHECKING:
    from gochatd.control import Control


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
            tenant_id=_text_arg("tenant", args.get("tenant")),
            channel=_text_arg("channel", args.get("channel")),
            limit=_int_arg("limit", args.get("limit"), 50, 1, MAX_PAGE),
            after_id=_cursor_arg(args.get("cursor")),
        )
        rows = await daemon.store.list_outbox(flt) if _storable(flt.tenant_id, flt.channel) else []
        cursor = str(rows[-1].id) if len(rows) == flt.limit else None
        return jsonify({"messages": [r.to_dict() for r in rows], "next_cursor": cursor})

    @app.get("/v1/outbox/<message_id>")
    async def get_outbox(message_id: str) -> Response:
        row = await daemon.store.get_outbox(_job_id(message_id))
        if row is None:
            raise ApiError(404, "not_found", f"outbox message {message_id} not found")
        return jsonify(row.to_dict())

    @app.post("/v1/outbox/<message_id>/retry")
    async def retry_outbox(message_id: str) -> Response:
        await _body(set())
        ident = _job_id(message_id)
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
