"""``outbox.channels``: channel name -> provider settings, validated once with the config.

YAML::

    outbox:
      channels:
        whatsapp: {provider: webhook, url: "https://hooks.example/wa", secret_env: WA_HOOK_SECRET}

or ``GOCHAT_OUTBOX_CHANNELS`` holding the same mapping as JSON. Secrets are never config
values: ``secret_env`` names the environment variable that holds one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gochatd.outbox.providers import ChannelConfig

CHANNEL_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_KEYS = frozenset({"provider", "url", "secret_env", "timeout_s", "retry_base_s", "retry_cap_s",
                   "options"})


def _number(name: str, key: str, raw: Any, default: float, lo: float, hi: float) -> float:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ValueError(f"{name}.{key} must be a number")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}.{key} must be a number") from None
    if not lo <= value <= hi:  # NaN fails this too
        raise ValueError(f"{name}.{key} must be in {lo:g}..{hi:g}")
    return value


def _channel(name: str, raw: Any) -> ChannelConfig:
    if not CHANNEL_RE.match(name):
        raise ValueError(f"channel name {name[:60]!r} must match [A-Za-z0-9_.:-]{{1,200}}")
    if not isinstance(raw, Mapping):
        raise ValueError(f"{name} must be a mapping such as {{provider: webhook, url: ...}}")
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise ValueError(f"{name}: unknown keys {', '.join(unknown[:5])}")
    provider = raw.get("provider", "webhook")
    if not isinstance(provider, str) or not CHANNEL_RE.match(provider):
        raise ValueError(f"{name}.provider must be a provider name")
    url = raw.get("url", "")
    if not isinstance(url, str) or (url and not url.startswith(("http://", "https://"))):
        raise ValueError(f"{name}.url must be an http:// or https:// URL")
    if provider == "webhook" and not url:
        raise ValueError(f"{name}.url is required by the webhook provider")
    if "@" in urlsplit(url).netloc:
        # The URL is printed by `config check`; a secret belongs in secret_env.
        raise ValueError(f"{name}.url must not hold credentials (user:password@); use secret_env")
    secret_env = raw.get("secret_env", "") or ""
    if not isinstance(secret_env, str) or (secret_env and not ENV_NAME_RE.match(secret_env)):
        raise ValueError(f"{name}.secret_env must be an environment variable name")
    options = raw.get("options", {}) or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"{name}.options must be a mapping")
    base = _number(name, "retry_base_s", raw.get("retry_base_s"), 1.0, 0.0, 86400.0)
    return ChannelConfig(
        name=name, provider=provider, url=url, secret_env=secret_env,
        timeout_s=_number(name, "timeout_s", raw.get("timeout_s"), 10.0, 0.05, 300.0),
        retry_base_s=base,
        retry_cap_s=_number(name, "retry_cap_s", raw.get("retry_cap_s"), max(300.0, base),
                            0.0, 7 * 86400.0),
        options=dict(options),
    )


def parse_channels(raw: Any) -> dict[str, ChannelConfig]:
    """A mapping (YAML) or a JSON object (environment) of channel -> settings."""
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError):
            raise ValueError("expected a JSON object of channel -> settings") from None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError("expected a mapping of channel -> settings")
    return {str(name): _channel(str(name), value) for name, value in raw.items()}
