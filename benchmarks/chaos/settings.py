"""Run options and the timing every daemon of the fleet gets.

Short leases and reap intervals keep fault recovery within seconds; every deadline the
scenarios use is derived from them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Timing:
    lease_s: float = 2.0
    reap_interval_s: float = 0.25
    block_timeout_s: float = 0.5
    poll_interval_max_s: float = 0.2
    sweep_interval_s: float = 1.0
    retry_base_s: float = 0.1
    retry_cap_s: float = 1.0
    shutdown_grace_s: float = 5.0
    concurrency: int = 8
    db_pool_size: int = 4
    #: ``worker.redis.stream_maxlen``: the cell ``overload`` sets it below its backlog.
    stream_maxlen: int = 100_000

    @property
    def recovery_bound_s(self) -> float:
        """A dead (or cut-off) daemon's leases must be reaped within this long: the lease
        runs out, the next reap takes it back (plus slack for a loaded two-core machine)."""
        return self.lease_s + self.reap_interval_s + 3.0

    def daemon_env(self) -> dict[str, str]:
        return {
            "GOCHAT_WORKER_LEASE_S": str(self.lease_s),
            "GOCHAT_WORKER_REAP_INTERVAL_S": str(self.reap_interval_s),
            "GOCHAT_WORKER_REDIS_BLOCK_TIMEOUT_S": str(self.block_timeout_s),
            "GOCHAT_WORKER_POLL_INTERVAL_MAX_S": str(self.poll_interval_max_s),
            "GOCHAT_WORKER_REDIS_SWEEP_INTERVAL_S": str(self.sweep_interval_s),
            "GOCHAT_WORKER_RETRY_BASE_S": str(self.retry_base_s),
            "GOCHAT_WORKER_RETRY_CAP_S": str(self.retry_cap_s),
            "GOCHAT_WORKER_SHUTDOWN_GRACE_S": str(self.shutdown_grace_s),
            "GOCHAT_WORKER_CONCURRENCY": str(self.concurrency),
            "GOCHAT_WORKER_DB_POOL_SIZE": str(self.db_pool_size),
            "GOCHAT_WORKER_REDIS_STREAM_MAXLEN": str(self.stream_maxlen),
        }


#: Queues every daemon serves. ``maint`` carries the maintenance probes (delayed and
#: lease-expiring jobs enqueued after a fault) so they never wait behind a backlog.
QUEUES = {"maint": 20, "high": 8, "default": 4, "low": 2}


@dataclass(frozen=True)
class Options:
    scenarios: list[str]
    jobs: int
    workers: int
    seed: int
    smoke: bool
    report: str | None = None
    keep: str | None = None
    timing: Timing = field(default_factory=Timing)
    #: The pressure cells (scenarios/pressure.py): seconds per phase, the offered rate, and
    #: the burst cell's burst.
    pressure_s: float = 120.0
    pressure_rate: float = 600.0
    burst_jobs: int = 100_000
    #: ``--pg-set``: settings appended to the run's cluster's postgresql.conf (diagnostics:
    #: ``shared_preload_libraries=pg_stat_statements`` adds each pressure phase's top
    #: statements to its notes).
    pg_settings: dict[str, str] = field(default_factory=dict)


DEFAULT_JOBS = 1000
SMOKE_JOBS = 120
DEFAULT_WORKERS = 3
#: ``--pressure-minutes``, ``--pressure-rate``, ``--burst-jobs`` when not given (full run,
#: smoke). The issue's full length is 10 minutes per phase: ``--pressure-minutes 10``.
DEFAULT_PRESSURE = (2.0, 600.0, 100_000)
SMOKE_PRESSURE = (0.1, 150.0, 3_000)
