"""Which tenants' rows one SQL store acts on (``SqlJobStore.tenant_scope``), and so which
set of named queries it runs.

During a live tenant migration the routed store runs several ``SqlJobStore``s (the home
database and the destinations); each must claim, reap, dispatch, count and finish only the
tenants routed to it, even though the home database still holds the moved tenants' rows.
A store whose scope is every tenant (``ALL``: always, outside a move) runs the plain
``sql/<dialect>/queries.sql``, with no tenant clause at all. Any other scope switches it to
the scoped set laid over the plain one: the same names, each query that acts across tenants
with its scope marker expanded into the clause (store/queries.py ``load_scoped_queries``),
and two more parameters, ``scope_only`` and ``scope_tenants``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from gochatd.store.queries import load_queries, load_scoped_queries
from gochatd.worker.runnable import ANY_TYPE, RunnableTypes


@dataclass(frozen=True, slots=True)
class TenantScope:
    """``only_listed``: exactly ``tenants``; otherwise every tenant except ``tenants``.
    Replaced wholesale (never mutated), so a statement sees one scope or the next."""

    only_listed: bool
    tenants: frozenset[str]
    #: The two query parameters per dialect, built once: they ride on every claim and finish.
    params: Mapping[str, Mapping[str, Any]] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        listed = sorted(self.tenants)  # a stable text, so equal scopes bind equal values
        # Plain dicts behind a Mapping type: ``{**params, **scope}`` takes the dict fast path.
        object.__setattr__(self, "params", {
            "postgres": {"scope_only": self.only_listed, "scope_tenants": listed},
            "sqlite": {"scope_only": self.only_listed, "scope_tenants": json.dumps(listed)},
        })

    @classmethod
    def all_except(cls, tenants: Iterable[str]) -> TenantScope:
        return cls(False, frozenset(tenants))

    @classmethod
    def only(cls, tenants: Iterable[str]) -> TenantScope:
        return cls(True, frozenset(tenants))

    @property
    def is_all(self) -> bool:
        return not self.only_listed and not self.tenants

    def __contains__(self, tenant_id: object) -> bool:
        return (tenant_id in self.tenants) == self.only_listed


#: No filter: every tenant (a store outside any migration).
ALL = TenantScope.all_except(())


@dataclass(frozen=True, slots=True)
class QuerySet:
    """The queries one store runs under one scope, and the parameters the scope and the
    claims' job-type filter add to each. Replaced wholesale with the scope: an operation reads it once, so all
    its statements run under one scope even if the router swaps it meanwhile."""

    sql: Mapping[str, str]
    args: Mapping[str, Any]

    def params(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` plus the scope's and the filter's (drivers ignore parameters a statement
        does not name)."""
        return {**params, **self.args}


@cache
def _scoped_sql(dialect: str) -> Mapping[str, str]:
    return {**load_queries(dialect), **load_scoped_queries(dialect)}


def query_set(dialect: str, scope: TenantScope,
              runnable: RunnableTypes = ANY_TYPE) -> QuerySet:
    """The queries for ``scope``; every statement also gets the claims' job-type filter
    (``runnable``: daemon/worker/runnable.py), which only the claim queries name."""
    if scope.is_all:
        return QuerySet(load_queries(dialect), runnable.params[dialect])
    return QuerySet(_scoped_sql(dialect), {**scope.params[dialect], **runnable.params[dialect]})


class QueriesInScope:
    """Mixed into ``SqlJobStore``: the query set it runs now, made of its tenant scope and
    its claims' job types (``runnable``), each replaced wholesale."""

    dialect: str
    #: The queries this store runs now: the plain set while it serves every tenant, the
    #: scoped one while it serves some. Replaced with ``tenant_scope`` and ``runnable``.
    _queries: QuerySet
    _scope: TenantScope
    _runnable: RunnableTypes

    def _init_scope(self) -> None:
        self._scope = ALL
        self._runnable = ANY_TYPE
        self._queries = query_set(self.dialect, ALL)

    @property
    def tenant_scope(self) -> TenantScope:
        """The tenants this store acts on; the router narrows it during a live migration.
        Replaced wholesale, never mutated."""
        return self._scope

    @tenant_scope.setter
    def tenant_scope(self, scope: TenantScope) -> None:
        # The queries first: a reader sees both or neither.
        self._queries = query_set(self.dialect, scope, self._runnable)
        self._scope = scope

    @property
    def runnable(self) -> RunnableTypes:
        """The job types the claims take (daemon/worker/runnable.py): the daemon's handlers, set
        before its first claim; ``ANY_TYPE`` until then."""
        return self._runnable

    @runnable.setter
    def runnable(self, runnable: RunnableTypes) -> None:
        self._queries = query_set(self.dialect, self._scope, runnable)
        self._runnable = runnable


__all__ = ["ALL", "QueriesInScope", "QuerySet", "TenantScope", "query_set"]
