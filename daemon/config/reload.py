"""Config reload (SIGHUP, ``POST /v1/reload``): re-read the config, apply the reloadable
keys to every component, and remember the keys that need a restart."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gochatd.config.settings import Settings, load_settings
from gochatd.errors import ConfigError
from gochatd.obs.logs import get_logger, reconfigure_logging


class Reloader:
    def __init__(self, settings: Settings, apply: Callable[[Settings], None], *,
                 reload_args: dict[str, Any] | None, worker_id: str) -> None:
        #: The settings in force now (reloadable keys as last applied).
        self.settings = settings
        self.last_reload_at: datetime | None = None
        self.pending_restart: list[str] = []
        self._apply = apply
        self._reload_args = reload_args or {}
        self._log = get_logger(worker_id=worker_id)

    def apply(self, settings: Settings) -> None:
        self.settings = settings
        self._apply(settings)

    def reload(self, *, strict: bool = False) -> tuple[list[str], list[str]]:
        """Re-read config. Returns (applied, needs_restart) keys. A bad config is logged and
        changes nothing; with ``strict`` (the admin API) it is raised too."""
        try:
            fresh = load_settings(**self._reload_args)
        except ConfigError as exc:
            self._log.error("reload_rejected", error=str(exc))
            if strict:
                raise
            return [], []
        applied, restart = self.settings.diff(fresh)
        self.last_reload_at = datetime.now(UTC)
        self.pending_restart = restart
        merged = self.settings.with_changes(
            **{k.replace(".", "_"): getattr(fresh, k.replace(".", "_")) for k in applied}
        )
        self.apply(merged)
        reconfigure_logging(merged.log_level, merged.log_format)
        self._log.info("config_reloaded", changed=applied, needs_restart=restart)
        return applied, restart
