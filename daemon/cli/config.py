"""``gochatd config check``: the effective config, secrets masked; it refuses what serve
would refuse."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gochatd.cli.common import settings_from
from gochatd.cli.parsing import add_group, add_subcommands
from gochatd.cli.serve import add_serve_args, check_listeners
from gochatd.config.settings import FIELDS, unknown_env, unknown_env_text
from gochatd.worker.registry import load_handler_modules


def add_parser(sub: Any) -> None:
    cfg_sub = add_subcommands(add_group(sub, "config", cmd_config, help="configuration"),
                              "config_command")
    add_serve_args(cfg_sub.add_parser("check", help="print the effective config, secrets masked"))


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
