"""The base of both SQL stores and of every part they are made of (store/ops.py, controls,
fleet, job types, routes, outbox, periodic slots): how a unit reaches a connection.

A store operation is a unit ``fn(db, *args)`` over a ``Db`` (store/db.py). ``_unit`` runs it
on a connection thread under the store's query set of the moment (its tenant scope and job
types), ``run_lent`` on a connection lent to the calling thread (``SyncClient``). Each
dialect supplies ``Connections``: how a unit gets a connection, and its driver's errors
translated at that boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from gochatd.model import Job
from gochatd.store.db import Db, decode_job, encode_list
from gochatd.store.scope import QueriesInScope, QuerySet

T = TypeVar("T")
P = ParamSpec("P")


class Connections(Protocol):
    """A dialect's connections: threads for the async stores, lent ones for ``SyncClient``."""

    async def run(self, unit: Callable[[Db], T], queries: QuerySet) -> T:
        """``unit`` on a connection thread (one hop); driver errors translated."""
        ...

    def run_lent(self, unit: Callable[[Db], T], queries: QuerySet) -> T:
        """``unit`` on the calling thread, on a lent connection; driver errors translated."""
        ...

    def close_lent(self) -> None: ...


class StoreCore(QueriesInScope):
    """What every part of a SQL store builds on: its units reach a connection here."""

    _conns: Connections

    async def _unit(self, fn: Callable[Concatenate[Db, P], T], *args: P.args,
                    **kwargs: P.kwargs) -> T:
        """Run the unit ``fn(db, *args)`` on a connection thread, under the query set of now
        (read once: all its statements run under one scope)."""
        return await self._conns.run(lambda db: fn(db, *args, **kwargs), self._queries)

    def run_lent(self, fn: Callable[Concatenate[Db, P], T], *args: P.args,
                 **kwargs: P.kwargs) -> T:
        """The same unit on the calling thread, on a lent connection (``SyncClient``)."""
        return self._conns.run_lent(lambda db: fn(db, *args, **kwargs), self._queries)

    def close_lent(self) -> None:
        """Close the lent connections (``SyncClient.close``)."""
        self._conns.close_lent()

    async def _read(self, name: str, params: dict[str, Any]) -> list[Any]:
        return await self._unit(read, name, params)

    async def _write(self, name: str, params: dict[str, Any]) -> list[Any]:
        return await self._unit(write, name, params)

    def _list(self, values: Sequence[Any]) -> Any:
        return encode_list(self.dialect, values)

    def _job(self, row: Sequence[Any]) -> Job:
        return decode_job(self.dialect, row)


def read(db: Db, name: str, params: dict[str, Any]) -> list[Any]:
    return db.read(name, params)


def write(db: Db, name: str, params: dict[str, Any]) -> list[Any]:
    return db.write(name, params)


__all__ = ["Connections", "StoreCore"]
