"""The bench's own named queries (``queries_<dialect>.sql`` next to this module): probes and
seeds of a scratch database, kept out of the daemon's query files."""

from __future__ import annotations

from functools import cache
from importlib import resources

from gochatd.store.queries import read_queries


@cache
def bench_queries(dialect: str) -> dict[str, str]:
    return read_queries(resources.files("benchmarks.bench").joinpath(f"queries_{dialect}.sql"))


__all__ = ["bench_queries"]
