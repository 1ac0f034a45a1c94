"""The systems under test: which adapter drives each, with which settings."""

from __future__ import annotations

from dataclasses import dataclass, field

ADAPTERS = "benchmarks.peers.adapters"


@dataclass(frozen=True)
class System:
    name: str
    #: the adapter module, run with the peers' venv python (``-m``)
    module: str
    #: extra environment for every adapter command (variants of one adapter)
    env: dict[str, str] = field(default_factory=dict)
    #: the number of jobs for the throughput phases, if smaller than --n (slow variants)
    n_cap: int | None = None


def _system(name: str, adapter: str, **env: str) -> System:
    return System(name, f"{ADAPTERS}.{adapter}_adapter", dict(env))


SYSTEMS: dict[str, System] = {s.name: s for s in [
    # gochatd: the headline row (PostgreSQL + Redis Streams) and the two extra modes.
    _system("gochatd", "gochatd", PEERS_GOCHATD_MODE="streams"),
    _system("gochatd-polling", "gochatd", PEERS_GOCHATD_MODE="polling"),
    _system("gochatd-sqlite", "gochatd", PEERS_GOCHATD_MODE="sqlite"),
    # The headline row's daemons fed by gochatd.SyncClient from producer threads (issue 12).
    _system("gochatd-sync", "gochatd", PEERS_GOCHATD_MODE="streams", PEERS_GOCHATD_PRODUCER="sync"),
    # Not in the default run: the headline row with one daemon instead of two.
    _system("gochatd-1proc", "gochatd", PEERS_GOCHATD_MODE="streams", PEERS_GOCHATD_PROCS="1"),
    # The peers, in the order of the table.
    _system("pgqueuer", "pgqueuer"),
    _system("taskiq", "taskiq"),
    _system("dramatiq", "dramatiq"),
    _system("saq", "saq"),
    _system("streaq", "streaq"),
    _system("arq", "arq"),
    _system("celery", "celery"),
    _system("rq", "rq"),
    _system("procrastinate", "procrastinate"),
]}

#: The row every ratio is taken against.
BASELINE = "gochatd"
DEFAULT_SYSTEMS = [name for name in SYSTEMS if name != "gochatd-1proc"]
#: ``--smoke``: gochatd and the two fastest peers (one durable on PostgreSQL, one on Redis).
SMOKE_SYSTEMS = ["gochatd", "pgqueuer", "taskiq"]
