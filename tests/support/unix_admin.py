"""The admin API over a Unix socket (``admin.listen: unix:PATH``), as an operator's
``curl --unix-socket PATH http://localhost/v1/status`` reaches it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx


def admin_get(socket_path: Path | str, target: str, timeout_s: float = 10.0) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=str(socket_path))
    with httpx.Client(transport=transport, timeout=timeout_s, trust_env=False) as client:
        return client.get(f"http://localhost{target}")


def admin_status(socket_path: Path | str) -> dict[str, Any]:
    response = admin_get(socket_path, "/v1/status")
    assert response.status_code == 200, response.text
    status: dict[str, Any] = response.json()
    return status
