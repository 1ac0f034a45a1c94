"""``gochatd periodic list``: each periodic job with its schedule and next runs."""

from __future__ import annotations

import argparse
from typing import Any

from gochatd.cli.argtypes import limit
from gochatd.cli.common import print_json, run_async, settings_from
from gochatd.cli.parsing import add_common, add_group, add_subcommands
from gochatd.obs.logs import configure_logging
from gochatd.worker.registry import load_handler_modules


def add_parser(sub: Any) -> None:
    per_sub = add_subcommands(add_group(sub, "periodic", cmd_periodic, help="periodic jobs"),
                              "periodic_command")
    pls = per_sub.add_parser("list", help="each periodic job with its schedule and next runs")
    add_common(pls)
    pls.add_argument("--handlers", metavar="MODULES", help="modules that declare @gochatd.periodic")
    pls.add_argument("--count", type=limit, default=3, help="next run times to show (default 3)")
    pls.add_argument("--json", action="store_true")


def cmd_periodic(args: argparse.Namespace) -> int:
    from gochatd.periodic_jobs.listing import list_periodic

    settings = settings_from(args)
    configure_logging("warning", "json")
    load_handler_modules(settings.handlers)

    async def run() -> int:
        listing = await list_periodic(settings, args.count)
        if args.json:
            print_json(listing.to_dict())
        else:
            print("\n".join(listing.lines()))
        return 0

    return run_async(run)
