"""Storage behind one ``JobStore`` protocol: ``postgres`` and ``sqlite``."""

from __future__ import annotations

from gochatd.errors import ConfigError
from gochatd.store.base import JobStore


def open_store(database_url: str, *, pool_size: int = 8) -> JobStore:
    """Build (not yet open) the store for a URL."""
    if database_url.startswith(("postgresql://", "postgres://")):
        from gochatd.store.postgres import PostgresStore

        return PostgresStore(database_url, pool_size=pool_size)
    if database_url.startswith("sqlite://"):
        from gochatd.store.sqlite import SqliteStore

        return SqliteStore.from_url(database_url)
    raise ConfigError("database_url: scheme must be postgresql:// or sqlite:///")


__all__ = ["JobStore", "open_store"]
