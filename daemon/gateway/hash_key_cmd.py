"""``gochatd gateway hash-key``: make a tenant API key's config entry.

With ``--generate`` a new random key is printed with its hash; otherwise the key is read
from stdin (one line), so it never appears in the shell history or the process list. Only
the hash goes into the configuration (``gateway.keys``).
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from gochatd.errors import UserError
from gochatd.gateway.keys import MAX_KEY_CHARS, generate_key, hash_key
from gochatd.gateway.settings import parse_tenants


def run_hash_key(generate: bool, tenant: str | None, stdin: TextIO, stdout: TextIO) -> int:
    if tenant is not None:
        try:
            parse_tenants({tenant: {}})
        except ValueError as exc:
            raise UserError(f"--tenant: {exc}") from None
    if generate:
        key = generate_key()
    else:
        line = stdin.readline()
        key = line.strip()
        if not key:
            raise UserError("no key on stdin; pipe one in, or use --generate for a new one")
        if len(key) > MAX_KEY_CHARS or not key.isprintable() or " " in key:
            raise UserError(f"the key must be 1-{MAX_KEY_CHARS} printable characters "
                            "without spaces")
    digest = hash_key(key)
    if generate:
        stdout.write(f"key:  {key}\n")
    stdout.write(f"hash: {digest}\n")
    if tenant is not None:
        stdout.write("# gochatd.yaml\ngateway:\n  keys:\n"
                     f"    \"{digest}\": {json.dumps(tenant)}\n")
    return 0


def main_hash_key(generate: bool, tenant: str | None) -> int:
    return run_hash_key(generate, tenant, sys.stdin, sys.stdout)
