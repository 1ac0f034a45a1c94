"""Storage behind one ``JobStore`` protocol: ``postgres`` and ``sqlite``."""

from __future__ import annotations

from typing import cast

from gochatd.errors import ConfigError
from gochatd.store.base import JobStore, RoutingStore


def open_store(database_url: str, *, pool_size: int = 8, listen_url: str | None = None,
               prepare: str = "auto") -> JobStore:
    """Build (not yet open) the store for a URL. PostgreSQL only: ``listen_url`` is a direct
    connection for LISTEN (``database_listen_url``), ``prepare`` is ``database_prepare``."""
    if database_url.startswith(("postgresql://", "postgres://")):
        from gochatd.store.postgres import PostgresStore

        return PostgresStore(database_url, pool_size=pool_size, listen_dsn=listen_url,
                             prepare=prepare)
    if database_url.startswith("sqlite://"):
        from gochatd.store.sqlite import SqliteStore

        return SqliteStore.from_url(database_url)
    raise ConfigError("database_url: scheme must be postgresql:// or sqlite:///")


def open_routed_store(database_url: str, *, pool_size: int = 8, listen_url: str | None = None,
                      prepare: str = "auto") -> RoutingStore:
    """The store the daemon and its tools use: the home database, plus the destinations of
    tenants that ``gochatd migrate`` moved (migrate/routing/store.py). Identical to the plain store
    while no route exists."""
    from gochatd.migrate.routing.core import ScopedStore
    from gochatd.migrate.routing.store import RoutedStore

    def sql_store(url: str, size: int) -> ScopedStore:
        return cast("ScopedStore", open_store(url, pool_size=size, prepare=prepare))

    home = open_store(database_url, pool_size=pool_size, listen_url=listen_url, prepare=prepare)
    return RoutedStore(cast("ScopedStore", home),
                       lambda url: sql_store(url, max(2, pool_size // 2)))


__all__ = ["JobStore", "RoutingStore", "open_routed_store", "open_store"]
