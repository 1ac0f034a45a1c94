"""Tenant API keys. The configuration holds ``sha256:<hex>`` hashes only, each mapped to a
tenant; a presented key is hashed and compared with every configured hash in constant time,
with no early exit, so neither timing nor order reveals which (if any) matched."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

HASH_PREFIX = "sha256:"
KEY_PREFIX = "gck_"
#: Longest Authorization value worth hashing; anything longer is not one of our keys.
MAX_KEY_CHARS = 512


def hash_key(key: str) -> str:
    """The config form of a key: ``sha256:<64 hex digits>``."""
    return HASH_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_key() -> str:
    """A new random tenant key (256 bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyRing:
    """Hash -> tenant, looked up in constant time over all configured hashes."""

    def __init__(self, hashes: Mapping[str, str]) -> None:
        self._entries = [(bytes.fromhex(h[len(HASH_PREFIX):]), t) for h, t in hashes.items()]

    def __len__(self) -> int:
        return len(self._entries)

    def tenant_for(self, key: str) -> str | None:
        if not key or len(key) > MAX_KEY_CHARS:
            return None
        try:
            digest = hashlib.sha256(key.encode("utf-8")).digest()
        except UnicodeEncodeError:
            return None
        found: str | None = None
        for configured, tenant in self._entries:
            # No early exit: every hash is compared whatever matched before.
            if hmac.compare_digest(digest, configured):
                found = tenant
        return found
