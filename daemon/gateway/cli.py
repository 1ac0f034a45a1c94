"""``gochatd gateway hash-key``: the gateway's tenant API keys from the command line."""

from __future__ import annotations

import argparse
from typing import Any

from gochatd.cli.parsing import add_group, add_subcommands


def add_parser(sub: Any) -> None:
    gw_sub = add_subcommands(add_group(sub, "gateway", cmd_gateway,
                                       help="the gateway's tenant API keys"), "gateway_command")
    hk = gw_sub.add_parser("hash-key", help="print the config hash of a key read from stdin, "
                           "or of a new one (--generate)")
    hk.add_argument("--generate", action="store_true", help="make a new random key")
    hk.add_argument("--tenant", help="also print the gateway.keys config entry for this tenant")


def cmd_gateway(args: argparse.Namespace) -> int:
    from gochatd.gateway.hash_key_cmd import main_hash_key

    return main_hash_key(args.generate, args.tenant)
