"""``gochatd db upgrade``: apply pending schema upgrades (safe to repeat)."""

from __future__ import annotations

import argparse
from typing import Any

from gochatd.cli.common import run_async, settings_from
from gochatd.cli.parsing import add_common, add_group, add_subcommands
from gochatd.store import open_store


def add_parser(sub: Any) -> None:
    db_sub = add_subcommands(add_group(sub, "db", cmd_db, help="database schema"), "db_command")
    add_common(db_sub.add_parser("upgrade", help="apply pending schema upgrades (safe to repeat)"))


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
