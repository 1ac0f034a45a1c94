"""The config keys: every one declared once in ``FIELDS`` with its parser, default, range,
whether SIGHUP may change it without a restart, and its help. ``DEFAULTS`` (attribute name
-> default) is read from the table: ``Settings`` and ``Client`` take their defaults from it.

The YAML path ``worker.redis.block_timeout_s`` is the env name
``GOCHAT_WORKER_REDIS_BLOCK_TIMEOUT_S`` and the attribute ``worker_redis_block_timeout_s``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gochatd.errors import ConfigError
from gochatd.model import DEFAULT_PRIORITY_AGING_S
from gochatd.worker.registry import QUEUE_RE

ENV_PREFIX = "GOCHAT_"

#: gochat's queues: high > events > default = automation = medium > low = search =
#: deferred = scheduled_jobs > purgable.
DEFAULT_QUEUE_WEIGHTS: dict[str, int] = {
    "high": 8,
    "events": 6,
    "default": 4,
    "automation": 4,
    "medium": 4,
    "low": 2,
    "search": 2,
    "deferred": 2,
    "scheduled_jobs": 2,
    "purgable": 1,
}


def feature_parser(module: str, name: str) -> Callable[[Any], Any]:
    """A feature's parser for the keys it owns, imported when a value is parsed: the table
    names every key without loading the features (``import gochatd`` stays light), and the
    features import this module's helpers (``mapping_value``) without a cycle."""

    def parse(raw: Any) -> Any:
        return getattr(importlib.import_module(module), name)(raw)

    parse.__name__ = name
    return parse


def mapping_value(raw: Any, expected: str) -> Mapping[str, Any]:
    """A mapping-valued config key: YAML gives a mapping, its environment variable holds the
    same as YAML/JSON text. Empty or null is an empty mapping."""
    if isinstance(raw, str):
        import yaml

        try:
            raw = yaml.safe_load(raw) if raw.strip() else {}
        except yaml.YAMLError:
            raise ValueError("expected a YAML or JSON mapping") from None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"expected {expected}")
    return raw


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise ValueError("expected true or false")


def _parse_list(raw: Any) -> list[str]:
    if isinstance(raw, list):
        items = [str(x).strip() for x in raw]
    else:
        items = [x.strip() for x in str(raw).split(",")]
    return [x for x in items if x]


def _parse_queues(raw: Any) -> dict[str, int]:
    """``high=8,default=4`` or ``high,default`` (weight 1) or a YAML mapping/list."""
    pairs: list[tuple[str, Any]]
    if isinstance(raw, Mapping):
        pairs = list(raw.items())
    else:
        pairs = []
        for item in _parse_list(raw):
            name, sep, weight = item.partition("=")
            pairs.append((name.strip(), weight.strip() if sep else DEFAULT_QUEUE_WEIGHTS.get(name, 1)))
    out: dict[str, int] = {}
    for name, weight in pairs:
        if not QUEUE_RE.match(str(name)):
            raise ValueError(f"invalid queue name {name!r}")
        out[str(name)] = _weight(str(name), weight)
    if not out:
        raise ValueError("at least one queue is needed")
    if not any(out.values()):
        raise ValueError("at least one queue needs a weight above 0")
    return out


def _weight(name: str, raw: Any) -> int:
    return _count("weight", name, raw, 0, 1000)


def _count(what: str, name: str, raw: Any, lo: int, hi: int) -> int:
    """An integer given as a YAML number or as text (``reports=2``), in lo..hi."""
    try:
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise ValueError
        value = int(raw.strip() if isinstance(raw, str) else raw)
    except ValueError:
        raise ValueError(f"{what} of {name!r} must be an integer in {lo}..{hi}, "
                         f"got {str(raw)[:40]!r}") from None
    if not lo <= value <= hi:
        raise ValueError(f"{what} of {name!r} must be an integer in {lo}..{hi}, got {value}")
    return value


#: The highest worker.queue_limits value (as tenants.<id>.max_running's).
MAX_QUEUE_RUNNING = 100_000


def queue_pairs(raw: Any, expected: str, example: str) -> list[tuple[str, Any]]:
    """``a=x,b=y`` or a YAML mapping: (queue, value) pairs, each queue name checked (for the
    per-queue keys: worker.queue_limits here, worker.queue_rates in config/rates.py)."""
    if isinstance(raw, str) and raw.strip().startswith("{"):
        raw = mapping_value(raw, expected)
    pairs: list[tuple[Any, Any]] = []
    if raw is None:
        pass
    elif isinstance(raw, Mapping):
        pairs = list(raw.items())
    elif isinstance(raw, str):
        for item in _parse_list(raw):
            name, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"expected queue=value items ({example}), got {item[:40]!r}")
            pairs.append((name.strip(), value))
    else:
        raise ValueError(f"expected {expected} or {example}")
    for name, _ in pairs:
        if not QUEUE_RE.match(str(name)):
            raise ValueError(f"invalid queue name {str(name)[:70]!r}")
    return [(str(name), value) for name, value in pairs]


def _parse_queue_limits(raw: Any) -> dict[str, int]:
    """``reports=2,exports=1`` or a YAML mapping (``{reports: 2}``): queue -> the most jobs
    of it running at once across the fleet. Empty: no queue is capped."""
    pairs = queue_pairs(raw, "a mapping of queue to max running jobs ({reports: 2})",
                        "reports=2,exports=1")
    return {name: _count("limit", name, limit, 1, MAX_QUEUE_RUNNING) for name, limit in pairs}


def _parse_url(schemes: tuple[str, ...], allow_empty: bool) -> Callable[[Any], str]:
    def parse(raw: Any) -> str:
        text = "" if raw is None else str(raw).strip()
        if not text:
            if allow_empty:
                return ""
            raise ValueError("must not be empty")
        scheme = text.split("://", 1)[0] if "://" in text else ""
        if scheme not in schemes:
            raise ValueError(f"scheme must be one of {', '.join(s + '://' for s in schemes)}")
        return text

    return parse


@dataclass(frozen=True, slots=True)
class FieldSpec:
    key: str  # dotted YAML path
    parse: Callable[[Any], Any]
    default: Any
    lo: float | None = None
    hi: float | None = None
    reloadable: bool = False
    secret: bool = False
    help: str = ""

    @property
    def attr(self) -> str:
        return self.key.replace(".", "_")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.attr.upper()

    def coerce(self, raw: Any, source: str = "env") -> Any:
        """``source``: where ``raw`` came from; a flag's error does not name the variable."""
        where = self.key if source == "flag" else f"{self.key} ({self.env})"
        try:
            value = self.parse(raw)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: must be a finite number")
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise ConfigError(f"{where}: {value!r} is outside {self.lo}..{self.hi}")
        return value


def _int(raw: Any) -> int:
    if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
        raise ValueError("expected an integer")
    if isinstance(raw, int | float):
        return int(raw)
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {str(raw)[:40]!r}") from None


def _float(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError("expected a number")
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {str(raw)[:40]!r}") from None


def _printable(limit: int) -> Callable[[Any], str]:
    """A scalar of at most ``limit`` printable characters (a YAML list or mapping is not
    silently turned into its Python repr)."""

    def parse(raw: Any) -> str:
        if isinstance(raw, Mapping | list):
            raise ValueError("expected a string")
        text = str(raw).strip()
        if len(text) > limit or not text.isprintable():
            raise ValueError(f"expected at most {limit} printable characters")
        return text

    return parse


def _name(raw: Any) -> str:
    """A Redis key part or consumer-group name: printable, no spaces."""
    if isinstance(raw, Mapping | list):
        raise ValueError("expected a string")
    text = str(raw).strip()
    if not 1 <= len(text) <= 200 or any(c.isspace() or not c.isprintable() for c in text):
        raise ValueError("expected 1-200 printable characters without spaces")
    return text


#: The longest socket path the kernel takes (sun_path is 108 bytes with its NUL).
_UNIX_PATH_MAX = 107


def _listen(raw: Any) -> str:
    """``host:port`` ([v6]:port allowed; port 0: any free one), ``unix:PATH`` or ``off``."""
    text = str(raw).strip()
    if text.lower() in {"off", "none", "false", ""}:
        return "off"
    if text.startswith("unix:"):
        path = text[len("unix:"):]
        if not path or "\0" in path or len(path.encode()) > _UNIX_PATH_MAX:
            raise ValueError(f"expected unix:PATH with a socket path of 1 to {_UNIX_PATH_MAX} "
                             "bytes (for example unix:/run/gochatd/worker-1.sock)")
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 <= int(port) < 65536:
        raise ValueError("expected host:port (for example 127.0.0.1:8410; port 0: any free "
                         "port), unix:/path/to.sock, or off")
    return text


def _prepare_mode(raw: Any) -> str:
    text = str(raw).strip().lower()
    if text not in {"auto", "on", "off"}:
        raise ValueError("expected auto, on or off")
    return text


def _log_format(raw: Any) -> str:
    text = str(raw).strip().lower()
    if text not in {"auto", "json", "console"}:
        raise ValueError("expected auto, json or console")
    return text


def _log_level(raw: Any) -> str:
    text = str(raw).strip().lower()
    if text not in {"debug", "info", "warning", "error"}:
        raise ValueError("expected debug, info, warning or error")
    return text


FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("database_url", _parse_url(("sqlite", "postgresql", "postgres"), False),
              "sqlite:///gochatd.db", secret=True,
              help="postgresql://… or sqlite:///path (relative to the working directory)"),
    FieldSpec("database_listen_url", _parse_url(("postgresql", "postgres"), True), "",
              secret=True, help="direct postgresql://… for LISTEN when database_url is a "
                                "pooler in transaction mode; empty there: poll (docs/pgbouncer.md)"),
    FieldSpec("database_prepare", _prepare_mode, "auto",
              help="server-side prepared statements: auto (off behind a pooler), on, off"),
    FieldSpec("redis_url", _parse_url(("redis", "rediss", "unix"), True), "", secret=True,
              help="empty: no Redis, workers poll the database"),
    FieldSpec("redis_cluster", _parse_bool, False,
              help="redis_url is a seed node of a Redis Cluster (docs/redis-cluster.md)"),
    FieldSpec("handlers", _parse_list, [], help="modules that register handlers"),
    FieldSpec("handlers.http", feature_parser("gochatd.worker.http_handlers", "parse_http_handlers"),
              {},
              help="job type or 'prefix:*' -> {url, timeout_s, secret_env}: run by an HTTP endpoint"),
    FieldSpec("periodic", feature_parser("gochatd.periodic_jobs.specs", "parse_periodic_config"), {},
              help="job type -> {cron [+ tz] | every, queue, payload, tenant_id, catch_up, max_attempts}"),
    FieldSpec("worker.id", _printable(200), "", help="lease owner name; default host:pid:random"),
    FieldSpec("worker.concurrency", _int, 10, 1, 10000, reloadable=True),
    FieldSpec("worker.queues", _parse_queues, dict(DEFAULT_QUEUE_WEIGHTS), reloadable=True,
              help="queue=weight list; weight 0 pauses reading that queue"),
    FieldSpec("worker.queue_limits", _parse_queue_limits, {}, reloadable=True,
              help="queue -> most jobs of it running at once, fleet-wide (reports=2,exports=1)"),
    FieldSpec("worker.queue_rates", feature_parser("gochatd.config.rates", "parse_queue_rates"), {},
              reloadable=True, help="queue -> most jobs of it started per s, m or h, fleet-wide"),
    FieldSpec("worker.strict_priority", _parse_bool, False, reloadable=True,
              help="read queues strictly by weight (queues, not a job's priority)"),
    FieldSpec("worker.priority_aging_s", _float, DEFAULT_PRIORITY_AGING_S, 0.001, 86400,
              reloadable=True,
              help="waiting this long raises a job one priority step, up to its queue's top"),
    FieldSpec("worker.lease_s", _float, 30.0, 1, 86400),
    FieldSpec("worker.shutdown_grace_s", _float, 30.0, 0, 86400, reloadable=True),
    FieldSpec("worker.max_payload_bytes", _int, 1 << 20, 2, 64 << 20),
    FieldSpec("worker.max_result_bytes", _int, 64 << 10, 4, 64 << 20, reloadable=True,
              help="largest handler result stored, as JSON in UTF-8; a larger one fails the job"),
    FieldSpec("worker.retry_base_s", _float, 1.0, 0, 86400, reloadable=True),
    FieldSpec("worker.retry_cap_s", _float, 3600.0, 0, 7 * 86400, reloadable=True),
    FieldSpec("worker.poll_interval_max_s", _float, 0.5, 0.005, 60, reloadable=True),
    FieldSpec("worker.reap_interval_s", _float, 5.0, 0.05, 3600, reloadable=True),
    FieldSpec("worker.db_pool_size", _int, 8, 2, 200),
    FieldSpec("worker.redis.stream_prefix", _name, "gochat:jobs"),
    FieldSpec("worker.redis.consumer_group", _name, "gochat-workers"),
    FieldSpec("worker.redis.block_timeout_s", _float, 2.0, 0.01, 60, reloadable=True),
    FieldSpec("worker.redis.sweep_interval_s", _float, 30.0, 0.05, 86400, reloadable=True),
    FieldSpec("worker.redis.stream_maxlen", _int, 100_000, 100, 100_000_000),
    FieldSpec("log.level", _log_level, "info", reloadable=True),
    FieldSpec("log.format", _log_format, "auto"),
    FieldSpec("admin.listen", _listen, "127.0.0.1:8410",
              help="host:port (port 0: any free one) or unix:/path of the admin API and "
              "dashboard; 'off' disables it"),
    FieldSpec("admin.token", _printable(4096), "", secret=True, reloadable=True,
              help="bearer token for mutating admin endpoints; required off loopback"),
    FieldSpec("admin.max_body_bytes", _int, 1 << 20, 1024, 64 << 20),
    FieldSpec("retention.completed_s", _float, 7 * 86400.0, 0, 3650 * 86400, reloadable=True,
              help="delete completed jobs this long after they finished; 0: keep forever"),
    FieldSpec("retention.dead_s", _float, 30 * 86400.0, 0, 3650 * 86400, reloadable=True,
              help="delete dead jobs this long after they died; 0: keep forever"),
    FieldSpec("retention.cancelled_s", _float, 30 * 86400.0, 0, 3650 * 86400, reloadable=True,
              help="delete cancelled jobs this long after the cancel; 0: keep forever"),
    FieldSpec("retention.batch", _int, 1000, 1, 100_000, reloadable=True,
              help="rows per DELETE; a pass repeats until less than a batch is left"),
    FieldSpec("retention.interval_s", _float, 300.0, 0.05, 86400, reloadable=True,
              help="time between retention passes"),
    FieldSpec("outbox.enabled", _parse_bool, True, help="run the reply outbox sender"),
    FieldSpec("outbox.concurrency", _int, 8, 1, 1000, help="deliveries in flight"),
    FieldSpec("outbox.lease_s", _float, 30.0, 1, 3600,
              help="a sending row's lease; another daemon redelivers after it expires"),
    FieldSpec("outbox.poll_s", _float, 1.0, 0.01, 60, reloadable=True,
              help="due-row poll when no local completion wrote replies"),
    FieldSpec("outbox.max_attempts", _int, 25, 1, 1000, reloadable=True),
    FieldSpec("outbox.channels", feature_parser("gochatd.outbox.channels", "parse_channels"), {},
              help="channel -> {provider, url, secret_env, timeout_s, retry_base_s, retry_cap_s}"),
    FieldSpec("gateway.listen", feature_parser("gochatd.gateway.settings", "parse_gateway_listen"), "",
              help="empty: POST /v1/jobs on the admin listener; host:port: its own; off"),
    FieldSpec("gateway.keys", feature_parser("gochatd.gateway.settings", "parse_keys"), {}, reloadable=True,
              help="tenant API key hashes: {'sha256:<hex>': tenant}"),
    FieldSpec("gateway.rate_per_s", _float, 100.0, 0, 1_000_000, reloadable=True,
              help="default jobs per second per tenant; 0: no limit"),
    FieldSpec("gateway.burst", _int, 1000, 1, 1_000_000, reloadable=True,
              help="default burst per tenant (jobs admitted at once)"),
    FieldSpec("tenants", feature_parser("gochatd.gateway.settings", "parse_tenants"), {}, reloadable=True,
              help="per-tenant limits: {tenant: {rate_per_s, burst, max_running}}"),
)
FIELDS_BY_KEY = {f.key: f for f in FIELDS}
FIELDS_BY_ATTR = {f.attr: f for f in FIELDS}


#: Each key's default by attribute name (``worker_lease_s``), straight from ``FIELDS``.
#: Mutable defaults (lists, mappings) are shared: copy before changing (``copy_default``).
DEFAULTS: Mapping[str, Any] = MappingProxyType({f.attr: f.default for f in FIELDS})


def copy_default(value: Any) -> Any:
    """A default's own copy, so that no two Settings share one list or mapping."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value
