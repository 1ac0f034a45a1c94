"""What a daemon can run: the job types its claims may take (docs/job-types.md).

A daemon runs a job type when it has a Python handler for it (``@gochatd.job``, the built-in
``sys:*`` ones included) or an HTTP handler route (``handlers.http``: the exact type, or a
``prefix:*`` route, which runs every type starting with ``prefix:``). Every claim (polling,
stream-delivered ids, the capped claims) carries this set as three parameters and takes
only matching rows, so a daemon never spends a job it cannot run: the job stays waiting for
a daemon that has the handler. ``ANY_TYPE`` (a store used without a daemon's handler set:
tests, tools) filters nothing.

The same set, as JSON, is written into the daemon's fleet row, so the admin API and
``/metrics`` can tell which waiting jobs no live daemon can run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class RunnableTypes:
    """Exact job types, plus prefixes (``report:`` for a ``report:*`` route). ``any_type``:
    no filter at all. Replaced wholesale, never mutated."""

    types: frozenset[str] = frozenset()
    prefixes: frozenset[str] = frozenset()
    any_type: bool = False
    #: The claim queries' three parameters per dialect, built once.
    params: Mapping[str, Mapping[str, Any]] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        types, prefixes = sorted(self.types), sorted(self.prefixes)
        object.__setattr__(self, "params", {
            "postgres": {"any_type": self.any_type, "job_types": types,
                         "type_prefixes": prefixes},
            "sqlite": {"any_type": self.any_type, "job_types": json.dumps(types),
                       "type_prefixes": json.dumps(prefixes)},
        })

    @classmethod
    def of(cls, job_types: Iterable[str], patterns: Iterable[str] = ()) -> RunnableTypes:
        """Registered types plus HTTP route patterns (``t`` or ``prefix:*``)."""
        types, prefixes = set(job_types), set()
        for pattern in patterns:
            if pattern.endswith(":*"):
                prefixes.add(pattern[:-1])
            else:
                types.add(pattern)
        return cls(frozenset(types), frozenset(prefixes))

    def can_run(self, job_type: str) -> bool:
        return (self.any_type or job_type in self.types
                or any(job_type.startswith(p) for p in self.prefixes))

    def to_json(self) -> str:
        """For the fleet row: ``{"types": [...], "prefixes": [...]}``."""
        return json.dumps({"types": sorted(self.types), "prefixes": sorted(self.prefixes)},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> RunnableTypes | None:
        """A fleet row's set; None for a row without one (a daemon of an older release)
        or one that cannot be read."""
        if not text:
            return None
        try:
            raw = json.loads(text)
            types, prefixes = raw["types"], raw["prefixes"]
        except (ValueError, TypeError, KeyError):
            return None
        if not (isinstance(types, list) and isinstance(prefixes, list)):
            return None
        return cls(frozenset(str(t) for t in types), frozenset(str(p) for p in prefixes))


#: No filter: a store's claims before a daemon sets its handler set.
ANY_TYPE = RunnableTypes(any_type=True)
