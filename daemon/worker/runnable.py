"""What a daemon can run: the job types its claims may take (docs/job-types.md).

A daemon runs a job type when it has a Python handler for it (``@gochatd.job``, the built-in
``sys:*`` ones included) or an HTTP handler route (``handlers.http``: the exact type, or a
``prefix:*`` route, which runs every type starting with ``prefix:``). Every claim (polling,
stream-delivered ids, the capped claims) carries this set as three parameters and takes
only matching rows, so a daemon never spends a job it cannot run: the job stays waiting for
a daemon that has the handler. ``ANY_TYPE`` (a store used without a daemon's handler set:
tests, tools) filters nothing.

The same set and the daemon's queues (``DaemonHandlers``), as JSON, are written into the
daemon's fleet row: the admin API and ``/metrics`` tell from them which waiting jobs no live
daemon can run (``without_handler``), and a streams daemon whether another daemon of its
queues lacks some of its types (it then claims the due jobs it can run every
``poll_interval_max_s``: capped_backlog.py).
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
            "postgres": {"runnable_any": self.any_type, "runnable_types": types,
                         "runnable_prefixes": prefixes},
            "sqlite": {"runnable_any": self.any_type, "runnable_types": json.dumps(types),
                       "runnable_prefixes": json.dumps(prefixes)},
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

    def covers(self, other: RunnableTypes) -> bool:
        """Whether this set runs every type ``other`` runs (as far as its lists tell)."""
        return self.any_type or (other.types <= self.types and other.prefixes <= self.prefixes)


#: No filter: a store's claims before a daemon sets its handler set.
ANY_TYPE = RunnableTypes(any_type=True)


@dataclass(frozen=True, slots=True)
class DaemonHandlers:
    """What one daemon runs and where: its fleet row's ``job_types`` column."""

    runnable: RunnableTypes
    queues: frozenset[str]

    def to_json(self) -> str:
        return json.dumps({"types": sorted(self.runnable.types),
                           "prefixes": sorted(self.runnable.prefixes),
                           "queues": sorted(self.queues)}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> DaemonHandlers | None:
        """A fleet row's set; None for a row without one (a daemon of an older release,
        which claims every type) or one that cannot be read."""
        if not text:
            return None
        try:
            raw = json.loads(text)
            lists = [raw[key] for key in ("types", "prefixes", "queues")]
        except (ValueError, TypeError, KeyError):
            return None
        if not all(isinstance(v, list) for v in lists):
            return None
        types, prefixes, queues = (frozenset(str(x) for x in v) for v in lists)
        return cls(RunnableTypes(types, prefixes), queues)

    def can_run(self, job_type: str, queue: str) -> bool:
        return queue in self.queues and self.runnable.can_run(job_type)

    def lacks_some_of(self, mine: DaemonHandlers) -> bool:
        """Whether this daemon reads a queue of ``mine`` and cannot run every type ``mine``
        runs: it acks stream entries that ``mine`` could have run."""
        return bool(self.queues & mine.queues) and not self.runnable.covers(mine.runnable)


@dataclass(frozen=True, slots=True)
class WaitingJobs:
    """Due waiting jobs of one (job type, queue)."""

    job_type: str
    queue: str
    jobs: int
    oldest_age_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"job_type": self.job_type, "queue": self.queue, "waiting": self.jobs,
                "oldest_age_s": round(max(0.0, self.oldest_age_s), 3)}


def without_handler(waiting: Iterable[WaitingJobs],
                    live: Iterable[DaemonHandlers | None]) -> list[WaitingJobs]:
    """The waiting jobs that no live daemon can run: none serves their queue with a
    handler for their type. A live daemon without a published set (an older release)
    claims everything, so while one runs nothing is reported."""
    sets = list(live)
    if any(s is None for s in sets):
        return []
    known = [s for s in sets if s is not None]
    return sorted((w for w in waiting
                   if not any(s.can_run(w.job_type, w.queue) for s in known)),
                  key=lambda w: (-w.jobs, w.job_type, w.queue))
