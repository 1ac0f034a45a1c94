"""The commands whose work lives in a feature's own module: ``db``, ``gateway``,
``periodic``, ``outbox``, ``migrate`` and ``bench``."""

from __future__ import annotations

import argparse

from gochatd.commands.common import print_json, run_async, settings_from
from gochatd.logs import configure_logging
from gochatd.registry import load_handler_modules
from gochatd.store import open_store


def cmd_db(args: argparse.Namespace) -> int:
    settings = settings_from(args)

    async def run() -> int:
        store = open_store(settings.database_url, prepare=settings.database_prepare)
        await store.open()
        try:
            applied = await store.migrate()
        finally:
            await store.close()
        print("applied: " + ", ".join(applied) if applied else "schema is up to date")
        return 0

    return run_async(run)


def cmd_gateway(args: argparse.Namespace) -> int:
    from gochatd.gateway.hash_key_cmd import main_hash_key

    return main_hash_key(args.generate, args.tenant)


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


def cmd_outbox(args: argparse.Namespace) -> int:
    from gochatd.outbox.cli import run_outbox_command

    settings = settings_from(args)
    configure_logging("warning", "json")
    return run_async(lambda: run_outbox_command(args, settings))


def cmd_migrate(args: argparse.Namespace) -> int:
    from gochatd.migrate.cli import run_migrate_command

    configure_logging("warning", "json")
    return run_migrate_command(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from gochatd.bench import run_bench

    configure_logging("error", "json")
    return run_async(lambda: run_bench(args))
