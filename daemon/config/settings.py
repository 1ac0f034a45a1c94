"""Settings: one frozen object, merged once from flags > env > YAML file > defaults.

Every key is declared in ``FIELDS`` (config/fields.py) with its type, default, range and
whether SIGHUP may change it without a restart; ``Settings`` names each key's attribute
and type, and takes its default from that table.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gochatd.config.fields import (
    DEFAULT_QUEUE_WEIGHTS,
    DEFAULTS,
    ENV_PREFIX,
    FIELDS,
    FIELDS_BY_ATTR,
    FIELDS_BY_KEY,
    FieldSpec,
    copy_default,
)
from gochatd.config.rates import QueueRate
from gochatd.errors import ConfigError
from gochatd.gateway.settings import TenantLimits
from gochatd.obs.redact import mask_url
from gochatd.outbox.providers import ChannelConfig

DEFAULT_CONFIG_FILE = Path("/etc/gochatd/gochatd.yaml")


def _default(attr: str) -> Any:
    """``attr``'s default (a scalar) from ``FIELDS``."""
    return DEFAULTS[attr]


def _fresh(attr: str) -> Callable[[], Any]:
    """A factory for ``attr``'s default list or mapping from ``FIELDS``: each Settings gets
    its own copy."""
    return lambda: copy_default(DEFAULTS[attr])


@dataclass(frozen=True)
class Settings:
    database_url: str = _default("database_url")
    database_listen_url: str = _default("database_listen_url")
    database_prepare: str = _default("database_prepare")
    redis_url: str = _default("redis_url")
    redis_cluster: bool = _default("redis_cluster")
    handlers: list[str] = field(default_factory=_fresh("handlers"))
    handlers_http: dict[str, dict[str, Any]] = field(default_factory=_fresh("handlers_http"))
    periodic: dict[str, dict[str, Any]] = field(default_factory=_fresh("periodic"))
    worker_id: str = _default("worker_id")
    worker_concurrency: int = _default("worker_concurrency")
    worker_queues: dict[str, int] = field(default_factory=_fresh("worker_queues"))
    worker_queue_limits: dict[str, int] = field(default_factory=_fresh("worker_queue_limits"))
    worker_queue_rates: dict[str, QueueRate] = field(default_factory=_fresh("worker_queue_rates"))
    worker_strict_priority: bool = _default("worker_strict_priority")
    worker_priority_aging_s: float = _default("worker_priority_aging_s")
    worker_lease_s: float = _default("worker_lease_s")
    worker_shutdown_grace_s: float = _default("worker_shutdown_grace_s")
    worker_max_payload_bytes: int = _default("worker_max_payload_bytes")
    worker_max_result_bytes: int = _default("worker_max_result_bytes")
    worker_retry_base_s: float = _default("worker_retry_base_s")
    worker_retry_cap_s: float = _default("worker_retry_cap_s")
    worker_poll_interval_max_s: float = _default("worker_poll_interval_max_s")
    worker_reap_interval_s: float = _default("worker_reap_interval_s")
    worker_db_pool_size: int = _default("worker_db_pool_size")
    worker_redis_stream_prefix: str = _default("worker_redis_stream_prefix")
    worker_redis_consumer_group: str = _default("worker_redis_consumer_group")
    worker_redis_block_timeout_s: float = _default("worker_redis_block_timeout_s")
    worker_redis_sweep_interval_s: float = _default("worker_redis_sweep_interval_s")
    worker_redis_stream_maxlen: int = _default("worker_redis_stream_maxlen")
    log_level: str = _default("log_level")
    log_format: str = _default("log_format")
    admin_listen: str = _default("admin_listen")
    admin_token: str = _default("admin_token")
    admin_max_body_bytes: int = _default("admin_max_body_bytes")
    retention_completed_s: float = _default("retention_completed_s")
    retention_dead_s: float = _default("retention_dead_s")
    retention_cancelled_s: float = _default("retention_cancelled_s")
    retention_batch: int = _default("retention_batch")
    retention_interval_s: float = _default("retention_interval_s")
    outbox_enabled: bool = _default("outbox_enabled")
    outbox_concurrency: int = _default("outbox_concurrency")
    outbox_lease_s: float = _default("outbox_lease_s")
    outbox_poll_s: float = _default("outbox_poll_s")
    outbox_max_attempts: int = _default("outbox_max_attempts")
    outbox_channels: dict[str, ChannelConfig] = field(default_factory=_fresh("outbox_channels"))
    gateway_listen: str = _default("gateway_listen")
    gateway_keys: dict[str, str] = field(default_factory=_fresh("gateway_keys"))
    gateway_rate_per_s: float = _default("gateway_rate_per_s")
    gateway_burst: int = _default("gateway_burst")
    tenants: dict[str, TenantLimits] = field(default_factory=_fresh("tenants"))
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
        values[spec.attr] = spec.coerce(raw, source) if source != "default" else copy_default(raw)
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
_OTHER_ENV = frozenset({"GOCHAT_CONFIG", "GOCHAT_TEST_PG_DSN", "GOCHAT_TEST_REDIS_SERVER",
                        "GOCHAT_TEST_INSTALLED_VENV"})


def unknown_env(settings: Settings) -> dict[str, str | None]:
    """Each GOCHAT_* variable no setting reads (ignored), with the one it most likely
    meant (``GOCHAT_WORKER_CONCURENCY`` -> ``GOCHAT_WORKER_CONCURRENCY``) or None. What
    ``gochatd config check`` prints and the daemon warns about at start."""
    names = settings.sources.get("_unknown_env")
    known = [f.env for f in FIELDS]
    return {name: next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.8)), None)
            for name in (names.split(",") if names else [])}


def unknown_env_text(unknown: Mapping[str, str | None]) -> str:
    """``A (did you mean B?), C``: the unknown variables as one line reads them."""
    return ", ".join(f"{name} (did you mean {close}?)" if close else name
                     for name, close in unknown.items())


def _plain(value: Any) -> Any:
    if isinstance(value, QueueRate):  # as it is written: 10/s
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
    return value


__all__ = [
    "DEFAULTS",
    "DEFAULT_CONFIG_FILE",
    "DEFAULT_QUEUE_WEIGHTS",
    "ENV_PREFIX",
    "FIELDS",
    "FIELDS_BY_ATTR",
    "FIELDS_BY_KEY",
    "FieldSpec",
    "Settings",
    "load_settings",
    "read_config_file",
    "unknown_env",
    "unknown_env_text",
]
