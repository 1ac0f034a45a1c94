"""``gochatd outbox list|show|retry``: the admin API's /v1/outbox from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gochatd.cli.argtypes import limit, row_id
from gochatd.cli.common import run_async, settings_from
from gochatd.cli.parsing import add_common, add_group, add_subcommands
from gochatd.config.settings import Settings
from gochatd.errors import InvalidTransition, UserError
from gochatd.obs.logs import configure_logging
from gochatd.outbox.model import OutboxFilter, OutboxMessage, OutboxStatus
from gochatd.store import open_routed_store
from gochatd.store.presence import require_database_file, require_schema


class OutboxNotFound(UserError):
    def __init__(self, message_id: int) -> None:
        super().__init__(f"outbox message {message_id} not found")


_message_id = row_id(1, "an outbox message id")
#: A tenant id and a channel name are both at most 200 characters.
_MAX_FILTER_CHARS = 200
_after_id = row_id(0, "an outbox message id or 0")


def add_parser(sub: Any) -> None:
    outbox = add_group(sub, "outbox", cmd_outbox,
                       help="inspect and retry reply outbox messages")
    outbox_sub = add_subcommands(outbox, "outbox_command")
    ls = outbox_sub.add_parser("list")
    add_common(ls)
    ls.add_argument("--status", choices=[s.value for s in OutboxStatus])
    ls.add_argument("--tenant")
    ls.add_argument("--channel")
    ls.add_argument("--limit", type=limit, default=1000,
                    help="at most this many (default 1000)")
    ls.add_argument("--after-id", type=_after_id)
    ls.add_argument("--json", action="store_true")
    for name in ("show", "retry"):
        p = outbox_sub.add_parser(name)
        add_common(p)
        p.add_argument("id", type=_message_id)
        if name == "show":
            p.add_argument("--json", action="store_true")


def cmd_outbox(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    configure_logging("warning", "json")
    return run_async(lambda: run_outbox_command(args, settings))


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")


def _print_table(rows: list[OutboxMessage]) -> None:
    print(f"{'ID':>8}  {'STATUS':8} {'CHANNEL':14} {'TENANT':12} {'ATT':>4}  {'ERROR':14} DEDUPE KEY")
    for m in rows:
        print(f"{m.id:>8}  {m.status:8} {m.channel[:14]:14} {m.tenant_id[:12]:12} "
              f"{m.attempts:>4}  {(m.error_class or '-')[:14]:14} {m.dedupe_key}")


def _filter(args: argparse.Namespace) -> OutboxFilter:
    """``outbox list``'s filters; a value no message can have is refused."""
    for flag, value in (("--tenant", args.tenant), ("--channel", args.channel)):
        if value is not None and not 1 <= len(value) <= _MAX_FILTER_CHARS:
            raise UserError(f"{flag}: expected 1-{_MAX_FILTER_CHARS} characters")
        if value is not None and not _is_text(value):
            raise UserError(f"{flag}: not valid UTF-8 text")
    return OutboxFilter(
        status=OutboxStatus(args.status) if args.status else None,
        tenant_id=args.tenant, channel=args.channel, limit=args.limit, after_id=args.after_id,
    )


def _is_text(value: str) -> bool:
    """Undecodable argv bytes arrive as lone surrogates, which no stored text holds."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


async def run_outbox_command(args: argparse.Namespace, settings: Settings) -> int:
    flt = _filter(args) if args.outbox_command == "list" else None
    require_database_file(settings.database_url)
    store = open_routed_store(settings.database_url, prepare=settings.database_prepare)
    await store.open()
    try:
        await require_schema(store, settings.database_url)
        if flt is not None:
            rows = await store.list_outbox(flt)
            if args.json:
                _print_json([m.to_dict() for m in rows])
            else:
                _print_table(rows)
            return 0
        if args.outbox_command == "show":
            row = await store.get_outbox(args.id)
            if row is None:
                raise OutboxNotFound(args.id)
            if args.json:
                _print_json(row.to_dict())
            else:
                for key, value in row.to_dict().items():
                    print(f"{key:20} {json.dumps(value) if isinstance(value, dict) else value}")
            return 0
        requeued = await store.requeue_outbox(args.id)
        if requeued is None:
            current = await store.get_outbox(args.id)
            if current is None:
                raise OutboxNotFound(args.id)
            raise InvalidTransition(
                f"cannot retry outbox message {args.id}: it is {current.status}, not dead")
        _print_json(requeued.to_dict())
        return 0
    finally:
        await store.close()
