"""``GET /v1/tenants``: each tenant's running jobs (fleet-wide) next to its limits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quart import Response, jsonify
from quart_trio import QuartTrio

if TYPE_CHECKING:
    from gochatd.worker.control import Control


def register(app: QuartTrio, daemon: Control) -> None:
    @app.get("/v1/tenants")
    async def tenants() -> Response:
        running = await daemon.store.running_by_tenant()
        settings = daemon.settings
        configured = settings.tenants
        out = []
        for name in sorted(set(configured) | set(running) | set(settings.gateway_keys.values())):
            limits = configured.get(name)
            out.append({
                "tenant": name,
                "running": running.get(name, 0),
                "max_running": limits.max_running if limits else None,
                "rate_per_s": limits.rate_per_s if limits and limits.rate_per_s is not None
                else settings.gateway_rate_per_s,
                "burst": limits.burst if limits and limits.burst is not None
                else settings.gateway_burst,
            })
        return jsonify({"tenants": out})
