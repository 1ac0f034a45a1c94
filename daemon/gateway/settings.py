"""Parsing of the gateway's config values: ``gateway.listen``, ``gateway.keys`` and
``tenants``. Each parser takes what YAML or an environment variable holds (a mapping, or a
JSON/YAML flow mapping as text) and raises ValueError with a message naming the problem."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gochatd.gateway.keys import HASH_PREFIX

_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")
MAX_TENANT_CHARS = 200
MAX_RATE_PER_S = 1_000_000.0
MAX_BURST = 1_000_000
MAX_RUNNING = 100_000


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """One tenant's limits; None means the gateway default (rate, burst) or no limit."""

    rate_per_s: float | None = None
    burst: int | None = None
    max_running: int | None = None


def _mapping(raw: Any, what: str) -> Mapping[Any, Any]:
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ValueError(f"expected a mapping of {what} (JSON or YAML)") from None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"expected a mapping of {what}")
    return raw


def _tenant_id(raw: Any) -> str:
    if not isinstance(raw, str) or not 1 <= len(raw) <= MAX_TENANT_CHARS or not raw.isprintable():
        raise ValueError(f"tenant ids are 1-{MAX_TENANT_CHARS} printable characters")
    return raw


def parse_keys(raw: Any) -> dict[str, str]:
    """``{"sha256:<hex>": tenant}``; text may also be ``sha256:<hex>=tenant,…``."""
    if isinstance(raw, str) and "=" in raw and not raw.lstrip().startswith("{"):
        pairs = [item.partition("=")[::2] for item in raw.split(",") if item.strip()]
        raw = {k.strip(): v.strip() for k, v in pairs}
    out: dict[str, str] = {}
    for key_hash, tenant in _mapping(raw, "key hashes to tenants").items():
        text = str(key_hash).strip().lower()
        if not _HASH.match(text):
            raise ValueError(f"a key is configured by its hash, {HASH_PREFIX}<64 hex digits> "
                             "(see 'gochatd gateway hash-key')")
        out[text] = _tenant_id(tenant)
    return out


def _number(raw: Any, name: str, lo: float, hi: float, integer: bool) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"{name} must be a number")
    if not math.isfinite(raw) or not lo <= raw <= hi or (integer and raw != int(raw)):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind} in {lo:g}..{hi:g}")
    return raw


def parse_tenants(raw: Any) -> dict[str, TenantLimits]:
    """``{tenant: {rate_per_s, burst, max_running}}``, every field optional."""
    out: dict[str, TenantLimits] = {}
    for tenant, fields in _mapping(raw, "tenants to limits").items():
        name = _tenant_id(tenant)
        fields = {} if fields is None else fields
        if not isinstance(fields, Mapping):
            raise ValueError(f"{name}: expected a mapping of rate_per_s, burst, max_running")
        unknown = sorted(str(k) for k in set(fields) - {"rate_per_s", "burst", "max_running"})
        if unknown:
            raise ValueError(f"{name}: unknown field {unknown[0]!r} "
                             "(allowed: rate_per_s, burst, max_running)")
        rate = fields.get("rate_per_s")
        burst = fields.get("burst")
        running = fields.get("max_running")
        out[name] = TenantLimits(
            rate_per_s=None if rate is None
            else float(_number(rate, f"{name}.rate_per_s", 0, MAX_RATE_PER_S, False)),
            burst=None if burst is None
            else int(_number(burst, f"{name}.burst", 1, MAX_BURST, True)),
            max_running=None if running is None
            else int(_number(running, f"{name}.max_running", 1, MAX_RUNNING, True)),
        )
    return out


def parse_gateway_listen(raw: Any) -> str:
    """Empty (or ``admin``): served on the admin listener; ``off``; or its own host:port."""
    text = "" if raw is None else str(raw).strip()
    if text.lower() in {"", "admin"}:
        return ""
    if text.lower() in {"off", "none", "false"}:
        return "off"
    host, sep, port = text.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 <= int(port) < 65536:
        raise ValueError("expected host:port, 'admin' (the admin listener) or off")
    return text


def max_running_limits(tenants: Mapping[str, TenantLimits]) -> dict[str, int]:
    """The tenants whose concurrency the workers must cap."""
    return {t: lim.max_running for t, lim in tenants.items() if lim.max_running is not None}


def check_gateway_keys(keys: Mapping[str, str], admin_token: str) -> None:
    """The admin token must never double as a tenant key (nor a tenant key as the token)."""
    from gochatd.errors import ConfigError
    from gochatd.gateway.keys import hash_key

    if admin_token and hash_key(admin_token) in keys:
        raise ConfigError("gateway.keys (GOCHAT_GATEWAY_KEYS): a key hash is the hash of "
                          "admin.token; give the tenant its own key")
