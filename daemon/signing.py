"""Signing outgoing HTTP requests (the outbox webhook provider, HTTP job handlers).

The header is ``X-Gochatd-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`` where the
HMAC key is the shared secret and the message is ``f"{t}.".encode() + raw_body``. The
timestamp is signed too, so a receiver that rejects old ``t`` values (``verify``'s
``tolerance_s``) cannot be fed a replayed request.
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Gochatd-Signature"
DEFAULT_TOLERANCE_S = 300.0


def signature(secret: bytes, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256)
    return mac.hexdigest()


def sign(secret: bytes, body: bytes, timestamp: int | None = None) -> str:
    """The header value for ``body``, signed now (or at ``timestamp``)."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={signature(secret, body, t)}"


def verify(
    secret: bytes, body: bytes, header: str, *, tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """What a receiver does: parse the header, check the age, compare in constant time."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    t_text, v1 = parts.get("t", ""), parts.get("v1", "")
    if not t_text.isascii() or not t_text.isdigit() or not v1:
        return False
    t = int(t_text)
    current = time.time() if now is None else now
    if abs(current - t) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, body, t), v1)
