"""Helpers for the gateway tests: tenant keys and their config, and requests with them."""

from __future__ import annotations

from typing import Any

from gochatd.gateway.keys import generate_key, hash_key
from gochatd.gateway.settings import TenantLimits

KEY_A = generate_key()
KEY_B = generate_key()
TENANT_A = "tenant-a"
TENANT_B = "tenant-b"
KEYS = {hash_key(KEY_A): TENANT_A, hash_key(KEY_B): TENANT_B}
#: The queue the workers in these tests never claim from: jobs put there stay as enqueued.
PARKED = "parked"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def gateway_overrides(**tenants: TenantLimits) -> dict[str, Any]:
    """Settings overrides: both tenants' keys, a generous default limit, ``tenants``."""
    return {"gateway_keys": dict(KEYS), "gateway_rate_per_s": 1000.0, "gateway_burst": 1000,
            "tenants": dict(tenants)}


def job_body(**fields: Any) -> dict[str, Any]:
    return {"job_type": "sys:noop", "payload": {"n": 1}, "queue": PARKED, **fields}
