"""Settings: one frozen object, merged once from flags > env > YAML file > defaults.

Every key is declared in ``FIELDS`` with its type, range and whether SIGHUP may change it
without a restart. The YAML path ``worker.redis.block_timeout_s`` is the env name
``GOCHAT_WORKER_REDIS_BLOCK_TIMEOUT_S`` and the attribute ``worker_redis_block_timeout_s``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gochatd.errors import ConfigError
from gochatd.gateway.settings import (
    TenantLimits,
    parse_gateway_listen,
    parse_keys,
    parse_tenants,
)
from gochatd.http_handlers import parse_http_handlers
from gochatd.model import DEFAULT_PRIORITY_AGING_S
from gochatd.outbox.channels import parse_channels
from gochatd.outbox.providers import ChannelConfig
from gochatd.periodic_jobs.specs import parse_periodic_config
from gochatd.redact import mask_url
from gochatd.registry import QUEUE_RE

DEFAULT_CONFIG_FILE = Path("/etc/gochatd/gochatd.yaml")
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
    try:
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise ValueError
        value = int(raw.strip() if isinstance(raw, str) else raw)
    except ValueError:
        raise ValueError(f"weight of {name!r} must be an integer in 0..1000, "
                         f"got {str(raw)[:40]!r}") from None
    if not 0 <= value <= 1000:
        raise ValueError(f"weight of {name!r} must be an integer in 0..1000, got {value}")
    return value


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


def _listen(raw: Any) -> str:
    """``host:port`` ([v6]:port allowed) or ``off``."""
    text = str(raw).strip()
    if text.lower() in {"off", "none", "false", ""}:
        return "off"
    host, sep, port = text.rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 <= int(port) < 65536:
        raise ValueError("expected host:port (for example 127.0.0.1:8410) or off")
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
    FieldSpec("redis_url", _parse_url(("redis", "rediss", "unix"), True), "", secret=True,
              help="empty: no Redis, workers poll the database"),
    FieldSpec("handlers", _parse_list, [], help="modules that register handlers"),
    FieldSpec("handlers.http", parse_http_handlers, {},
              help="job type or 'prefix:*' -> {url, timeout_s, secret_env}: run by an HTTP endpoint"),
    FieldSpec("periodic", parse_periodic_config, {},
              help="job type -> {cron | every, queue, payload, tenant_id, catch_up, max_attempts}"),
    FieldSpec("worker.id", _printable(200), "", help="lease owner name; default host:pid:random"),
    FieldSpec("worker.concurrency", _int, 10, 1, 10000, reloadable=True),
    FieldSpec("worker.queues", _parse_queues, dict(DEFAULT_QUEUE_WEIGHTS), reloadable=True,
              help="queue=weight list; weight 0 pauses reading that queue"),
    FieldSpec("worker.strict_priority", _parse_bool, False, reloadable=True,
              help="read queues strictly by weight (queues, not a job's priority)"),
    FieldSpec("worker.priority_aging_s", _float, DEFAULT_PRIORITY_AGING_S, 0.001, 86400,
              reloadable=True, help="waiting this long is worth one priority step"),
    FieldSpec("worker.lease_s", _float, 30.0, 1, 86400),
    FieldSpec("worker.shutdown_grace_s", _float, 30.0, 0, 86400, reloadable=True),
    FieldSpec("worker.max_payload_bytes", _int, 1 << 20, 2, 64 << 20),
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
              help="host:port of the admin API and dashboard; 'off' disables it"),
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
    FieldSpec("outbox.channels", parse_channels, {},
              help="channel -> {provider, url, secret_env, timeout_s, retry_base_s, retry_cap_s}"),
    FieldSpec("gateway.listen", parse_gateway_listen, "",
              help="empty: POST /v1/jobs on the admin listener; host:port: its own; off"),
    FieldSpec("gateway.keys", parse_keys, {}, reloadable=True,
              help="tenant API key hashes: {'sha256:<hex>': tenant}"),
    FieldSpec("gateway.rate_per_s", _float, 100.0, 0, 1_000_000, reloadable=True,
              help="default jobs per second per tenant; 0: no limit"),
    FieldSpec("gateway.burst", _int, 1000, 1, 1_000_000, reloadable=True,
              help="default burst per tenant (jobs admitted at once)"),
    FieldSpec("tenants", parse_tenants, {}, reloadable=True,
              help="per-tenant limits: {tenant: {rate_per_s, burst, max_running}}"),
)
FIELDS_BY_KEY = {f.key: f for f in FIELDS}
FIELDS_BY_ATTR = {f.attr: f for f in FIELDS}


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///gochatd.db"
    redis_url: str = ""
    handlers: list[str] = field(default_factory=list)
    handlers_http: dict[str, dict[str, Any]] = field(default_factory=dict)
    periodic: dict[str, dict[str, Any]] = field(default_factory=dict)
    worker_id: str = ""
    worker_concurrency: int = 10
    worker_queues: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_QUEUE_WEIGHTS))
    worker_strict_priority: bool = False
    worker_priority_aging_s: float = DEFAULT_PRIORITY_AGING_S
    worker_lease_s: float = 30.0
    worker_shutdown_grace_s: float = 30.0
    worker_max_payload_bytes: int = 1 << 20
    worker_retry_base_s: float = 1.0
    worker_retry_cap_s: float = 3600.0
    worker_poll_interval_max_s: float = 0.5
    worker_reap_interval_s: float = 5.0
    worker_db_pool_size: int = 8
    worker_redis_stream_prefix: str = "gochat:jobs"
    worker_redis_consumer_group: str = "gochat-workers"
    worker_redis_block_timeout_s: float = 2.0
    worker_redis_sweep_interval_s: float = 30.0
    worker_redis_stream_maxlen: int = 100_000
    log_level: str = "info"
    log_format: str = "auto"
    admin_listen: str = "127.0.0.1:8410"
    admin_token: str = ""
    admin_max_body_bytes: int = 1 << 20
    retention_completed_s: float = 7 * 86400.0
    retention_dead_s: float = 30 * 86400.0
    retention_cancelled_s: float = 30 * 86400.0
    retention_batch: int = 1000
    retention_interval_s: float = 300.0
    outbox_enabled: bool = True
    outbox_concurrency: int = 8
    outbox_lease_s: float = 30.0
    outbox_poll_s: float = 1.0
    outbox_max_attempts: int = 25
    outbox_channels: dict[str, ChannelConfig] = field(default_factory=dict)
    gateway_listen: str = ""
    gateway_keys: dict[str, str] = field(default_factory=dict)
    gateway_rate_per_s: float = 100.0
    gateway_burst: int = 1000
    tenants: dict[str, TenantLimits] = field(default_factory=dict)
    #: Where each value came from: default, file, env or flag.
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    config_file: str | None = field(default=None, compare=False)

    def with_changes(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def effective_worker_id(self) -> str:
        if self.worker_id:
            return self.worker_id
        return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    def masked(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in FIELDS:
            value = getattr(self, spec.attr)
            if spec.secret and isinstance(value, str):
                value = mask_url(value) if "://" in value else ("***" if value else "")
            if isinstance(value, dict):  # tenants: limits as plain JSON-able mappings
                value = {k: _plain(v) for k, v in value.items()}
            if spec.key == "handlers.http":  # a URL may carry credentials
                value = {k: {**v, "url": mask_url(v["url"])} for k, v in value.items()}
            out[spec.key] = value
        return out

    def diff(self, other: Settings) -> tuple[list[str], list[str]]:
        """Keys that differ, split into (reloadable, needs_restart)."""
        reload: list[str] = []
        restart: list[str] = []
        for spec in FIELDS:
            if getattr(self, spec.attr) != getattr(other, spec.attr):
                (reload if spec.reloadable else restart).append(spec.key)
        return reload, restart


#: YAML paths that name another key: ``handlers: {modules: [myapp.jobs], http: {...}}``.
_ALIASES = {"handlers.modules": "handlers"}


def _has_children(path: str) -> bool:
    """``handlers`` is a key (the module list) and a section (``handlers.http``)."""
    return any(k.startswith(path + ".") for k in FIELDS_BY_KEY)


def _flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        path = _ALIASES.get(f"{prefix}{key}", f"{prefix}{key}")
        if path in FIELDS_BY_KEY and not (isinstance(value, Mapping) and _has_children(path)):
            out[path] = value
        elif isinstance(value, Mapping):
            out.update(_flatten(value, path + "."))
        else:
            raise ConfigError(f"unknown config key {path!r}")
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: the later one would
    silently win (a second ``worker:`` section replaces the whole first one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable: construct_mapping reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text") from None
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or ""
        detail = f": {problem}" if problem.startswith("duplicate key") else ""
        raise ConfigError(f"config file {str(path)!r} is not valid YAML{where}{detail}") from None
    except RecursionError:
        raise ConfigError(f"config file {str(path)!r} is nested too deeply") from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping")
    return _flatten(doc)


def load_settings(
    *,
    config_file: str | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """Merge flags > env > file > defaults and validate every value once."""
    env = os.environ if env is None else env
    path: Path | None = None
    if config_file:
        path = Path(config_file)
    elif env.get("GOCHAT_CONFIG"):
        path = Path(env["GOCHAT_CONFIG"])
    elif DEFAULT_CONFIG_FILE.exists():
        path = DEFAULT_CONFIG_FILE
    from_file = read_config_file(path) if path else {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for spec in FIELDS:
        raw: Any = spec.default
        source = "default"
        if spec.key in from_file:
            raw, source = from_file[spec.key], "file"
        if spec.env in env:
            raw, source = env[spec.env], "env"
        if flags and flags.get(spec.key) is not None:
            raw, source = flags[spec.key], "flag"
        values[spec.attr] = spec.coerce(raw, source) if source != "default" else _copy(raw)
        sources[spec.key] = source
    unknown = sorted(
        k for k in env
        if k.startswith(ENV_PREFIX) and k not in {f.env for f in FIELDS} and k not in _OTHER_ENV
    )
    settings = Settings(**values, sources=sources, config_file=str(path) if path else None)
    if unknown:
        sources["_unknown_env"] = ",".join(unknown)
    return settings


#: GOCHAT_* variables that are read elsewhere and are not config keys.
_OTHER_ENV = frozenset({"GOCHAT_CONFIG", "GOCHAT_TEST_PG_DSN", "GOCHAT_TEST_REDIS_SERVER"})


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
    return value


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value
