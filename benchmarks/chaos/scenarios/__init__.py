"""Every scenario, in the order ``--scenario all`` runs them."""

from __future__ import annotations

from benchmarks.chaos.scenarios import (
    clocks,
    disk,
    failover,
    load,
    network,
    postgres,
    pressure,
    processes,
    redis,
)
from benchmarks.chaos.scenarios.base import Scenario

_BY_NAME = {s.name: s for s in [*processes.SCENARIOS, *postgres.SCENARIOS, *redis.SCENARIOS,
                                *load.SCENARIOS, *failover.SCENARIOS,
                                *clocks.SCENARIOS, *disk.SCENARIOS,
                                *pressure.SCENARIOS, *network.SCENARIOS]}

ORDER = [
    "crash_recovery", "repeated_kills", "postgres_restart", "pg_backend_kill", "pg_partition",
    "pgbouncer_restart",
    "redis_restart", "redis_partition", "redis_cluster_master_kill", "pool_exhaustion",
    "retry_storm", "priority_starvation", "poison_job", "rolling_restart", "clock_skew",
    "pg_failover_sync", "pg_failover_async", "host_clock_jump", "db_clock_jump",
    "pg_disk_full", "redis_maxmemory",
    "active_readers", "idle_in_transaction", "overload", "burst", "slow_network",
]
SCENARIOS: dict[str, Scenario] = {name: _BY_NAME[name] for name in ORDER}
assert set(SCENARIOS) == set(_BY_NAME), "a scenario is missing from ORDER"

__all__ = ["ORDER", "SCENARIOS", "Scenario"]
