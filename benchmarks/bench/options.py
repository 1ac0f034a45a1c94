"""What a bench run measures and at what size: parsed once from the command line.

``--smoke`` shrinks every size so that all scenarios run in well under a minute; the figures
are then only a check that every row can be measured, not a performance result."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

#: ``postgres+redis-cluster``: a 3-master Redis Cluster the bench starts on loopback.
BACKENDS = ("sqlite", "postgres", "postgres+redis", "postgres+redis-cluster")
#: ``--pgbouncer``: each PostgreSQL backend's twin through a pgbouncer in transaction mode.
POOLED = {"postgres": "pgbouncer", "postgres+redis": "pgbouncer+redis"}
SCENARIOS = ("throughput", "latency", "daemon", "runtimes", "backlog", "soak", "idle-in-tx",
             "migrate", "dashboard", "budget")
#: The default: the rows that take a minute or two. ``all`` adds the long ones.
CORE_SCENARIOS = ("throughput", "latency", "daemon", "runtimes")
DEFAULT_PG = "postgresql://root@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, slots=True)
class Sizes:
    jobs: int  # throughput: backlog and e2e jobs; daemon-process jobs (>= 100)
    idle_samples: int
    half_load_s: float  # claim latency at half of the max rate: how long to offer it
    delayed_jobs: int
    delayed_ahead_s: float
    soak_jobs: int
    backlog_small: int
    backlog_big: int
    backlog_rounds: int  # rounds of 2 claims of 100 + a finish; at most backlog_small/400
    idle_tx_hold_s: float
    idle_tx_clean_s: float
    idle_tx_rate: float
    stats_interval_s: float  # idle-in-tx: pg_stat_user_tables sampling
    migrate_jobs: int  # migrate: jobs moved SQLite -> PostgreSQL
    migrate_rounds: int  # migrate: tracking cost, rounds over the variants
    migrate_samples: int  # ... sequential enqueues per variant and round
    migrate_batches: int  # ... enqueue_many calls per variant and round
    migrate_batch: int  # ... jobs per enqueue_many
    runtime_rounds: int  # runtimes: alternating rounds of each producer and handler runtime
    dashboard_jobs: int  # dashboard: jobs in the table its queries are timed on


FULL = Sizes(
    jobs=10_000, idle_samples=200, half_load_s=10.0, delayed_jobs=200, delayed_ahead_s=0.2,
    soak_jobs=1_000_000, backlog_small=10_000, backlog_big=1_000_000, backlog_rounds=25,
    idle_tx_hold_s=600.0, idle_tx_clean_s=60.0, idle_tx_rate=1000.0, stats_interval_s=10.0,
    migrate_jobs=1_000_000, migrate_rounds=7, migrate_samples=300, migrate_batches=3,
    migrate_batch=1_000, runtime_rounds=3, dashboard_jobs=1_000_000,
)
SMOKE = Sizes(
    jobs=300, idle_samples=20, half_load_s=1.0, delayed_jobs=20, delayed_ahead_s=0.2,
    soak_jobs=2_000, backlog_small=2_000, backlog_big=10_000, backlog_rounds=5,
    idle_tx_hold_s=2.0, idle_tx_clean_s=1.0, idle_tx_rate=200.0, stats_interval_s=0.5,
    migrate_jobs=2_000, migrate_rounds=2, migrate_samples=30, migrate_batches=1,
    migrate_batch=200, runtime_rounds=1, dashboard_jobs=5_000,
)


@dataclass(frozen=True, slots=True)
class BenchOptions:
    scenarios: tuple[str, ...]
    backends: tuple[str, ...]
    sizes: Sizes
    smoke: bool
    pg_server: str
    redis_url: str
    concurrency: int
    producers: int
    json_path: str | None
    profile_path: str | None
    budget_md: str | None = None

    @property
    def stream_backend(self) -> str:
        """The backend the single-backend scenarios (latency, daemon...) use."""
        for name in ("postgres+redis", "postgres", "sqlite"):
            if name in self.backends:
                return name
        return self.backends[0]


def _split(text: str, allowed: tuple[str, ...], what: str,
           extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Names from ``allowed`` (or ``extra``, which ``all`` leaves out), in the order given."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if "all" in names:
        return allowed
    bad = [n for n in names if n not in allowed + extra]
    if bad or not names:
        raise ValueError(f"{what}: expected a comma-separated list of "
                         f"{', '.join(allowed + extra)} "
                         f"or all (got {text!r})")
    return names


def from_args(args: argparse.Namespace) -> BenchOptions:
    """Raises ValueError with a one-line message for a bad combination."""
    smoke = bool(args.smoke)
    base = SMOKE if smoke else FULL
    scenario_text = args.scenario or ("all" if smoke else ",".join(CORE_SCENARIOS))
    scenarios = _split(scenario_text, SCENARIOS, "--scenario")
    backends = _split(args.backend, BACKENDS, "--backend", tuple(POOLED.values()))
    if getattr(args, "pgbouncer", False):
        twins = tuple(POOLED[b] for b in backends if b in POOLED and POOLED[b] not in backends)
        if not twins:
            raise ValueError("--pgbouncer: expected a PostgreSQL --backend to compare with")
        backends += twins
    changes = {
        "jobs": args.jobs, "soak_jobs": args.soak_jobs, "backlog_big": args.backlog_jobs,
        "idle_tx_rate": args.idle_tx_rate, "migrate_jobs": args.migrate_jobs,
        "idle_tx_hold_s": None if args.idle_tx_minutes is None else args.idle_tx_minutes * 60,
    }
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    fields.update({k: v for k, v in changes.items() if v is not None})
    sizes = Sizes(**fields)
    if sizes.jobs < 100:
        raise ValueError("--jobs: expected at least 100")
    if sizes.migrate_jobs < 100:
        raise ValueError("--migrate-jobs: expected at least 100")
    if sizes.backlog_big < sizes.backlog_small:
        raise ValueError(f"--backlog-jobs: expected at least {sizes.backlog_small}")
    pg = args.database_url or os.environ.get("GOCHAT_DATABASE_URL") or DEFAULT_PG
    if not pg.startswith(("postgresql://", "postgres://")):
        pg = DEFAULT_PG
    return BenchOptions(
        scenarios=scenarios, backends=backends, sizes=sizes, smoke=smoke, pg_server=pg,
        redis_url=args.redis or os.environ.get("GOCHAT_REDIS_URL") or DEFAULT_REDIS,
        concurrency=args.concurrency, producers=args.producers, json_path=args.json,
        profile_path=args.profile, budget_md=getattr(args, "budget_md", None),
    )
