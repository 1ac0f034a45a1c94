"""``gochatd serve``, the default command; its flags are also ``gochatd config check``'s."""

from __future__ import annotations

import argparse
import signal
from typing import Any

from gochatd.cli.common import run_async, settings_from
from gochatd.cli.parsing import add_common, add_group
from gochatd.config.settings import Settings, unknown_env
from gochatd.gateway.settings import check_gateway_keys
from gochatd.obs.logs import configure_logging, get_logger
from gochatd.worker.registry import load_handler_modules


def add_parser(sub: Any) -> None:
    add_serve_args(add_group(sub, "serve", cmd_serve, help="run the worker daemon (the default)"))


def add_serve_args(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument("--worker-only", action="store_true", help="run the worker loops only")
    p.add_argument("--handlers", metavar="MODULES", help="comma-separated handler modules")
    p.add_argument("--queues", metavar="Q[=W],…", help="queues to serve, with weights")
    p.add_argument("--concurrency", metavar="N", help="handler slots")
    p.add_argument("--upgrade", "--migrate", action="store_true",
                   help="upgrade the database schema at start (as `gochatd db upgrade`)")
    p.add_argument("--admin-listen", metavar="HOST:PORT|off",
                   help="admin API and dashboard address (default 127.0.0.1:8410)")


def cmd_serve(args: argparse.Namespace) -> int:
    from gochatd.worker.service import Worker

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
    worker = Worker(settings, migrate=args.upgrade, reload_args=reload_args,
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
