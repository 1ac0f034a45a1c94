"""Which tenants' rows one SQL store acts on (``SqlJobStore.tenant_scope``).

During a live tenant migration the routed store runs several ``SqlJobStore``s (the home
database and the destinations); each must claim, reap, dispatch, count and finish only the
tenants routed to it, even though the home database still holds the moved tenants' rows.
The scope travels as two parameters of every query that includes the ``{_in_tenant_scope}``
fragment (sql/<dialect>/queries.sql): ``scope_only`` and ``scope_tenants``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


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


def scoped_queries(queries: Mapping[str, str]) -> frozenset[str]:
    """The names of the queries that take the scope parameters, found once at import."""
    return frozenset(
        name for name, text in queries.items()
        if "scope_only" in text and not name.startswith("_")
    )


__all__ = ["ALL", "TenantScope", "scoped_queries"]
