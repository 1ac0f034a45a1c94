"""``gochatd serve`` (the default command) and ``gochatd config check``, which refuses what
serve would refuse."""

from __future__ import annotations

import argparse
import json
import signal

from gochatd.commands.common import run_async, settings_from
from gochatd.config import FIELDS, Settings, unknown_env, unknown_env_text
from gochatd.gateway.settings import check_gateway_keys
from gochatd.logs import configure_logging, get_logger
from gochatd.registry import load_handler_modules


def cmd_serve(args: argparse.Namespace) -> int:
    from gochatd.service import Worker

    settings = settings_from(args)
    configure_logging(settings.log_level, settings.log_format)
    for name, close in unknown_env(settings).items():  # as config check says them
        get_logger().warning("unknown_env_ignored", variable=name, did_you_mean=close)
    load_handler_modules(settings.handlers)
    reload_args = {"config_file": args.config, "flags": {
        "database_url": args.database_url, "redis_url": args.redis_url,
        "handlers": args.handlers, "worker.queues": args.queues,
        "worker.concurrency": args.concurrency, "admin.listen": args.admin_listen,
    }}
    check_listeners(settings)
    worker = Worker(settings, migrate=args.migrate, reload_args=reload_args,
                    gateway=not args.worker_only)
    try:
        return run_async(lambda: worker.run(handle_signals=True))
    finally:
        # The run is over and its signal watcher gone: a late SIGTERM/SIGINT must not turn
        # the exit code it chose into a death by that signal while the process ends.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)


def check_listeners(settings: Settings) -> None:
    """The admin listener's token rule and the gateway's keys, before anything starts."""
    if settings.admin_listen != "off":
        from gochatd.admin.server import check_admin_settings

        check_admin_settings(settings.admin_listen, settings.admin_token)
    check_gateway_keys(settings.gateway_keys, settings.admin_token)


def cmd_config(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    load_handler_modules(settings.handlers)
    check_listeners(settings)  # what serve would refuse, check refuses too
    masked = settings.masked()
    width = max(len(k) for k in masked)
    for spec in FIELDS:
        value = masked[spec.key]
        shown = json.dumps(value) if not isinstance(value, str) else value
        source = settings.sources.get(spec.key, "default")
        flag = "" if spec.reloadable else "  (restart)"
        print(f"{spec.key:{width}}  {shown}  [{source}]{flag}")
    if settings.config_file:
        print(f"# config file: {settings.config_file}")
    unknown = unknown_env(settings)
    if unknown:
        print(f"# warning: unknown GOCHAT_ variables ignored: {unknown_env_text(unknown)}")
    return 0
