"""argparse ``type=`` functions shared by the command groups. Each one's ``__name__`` is
what argparse prints in its one-line error ("invalid a job id value: 'x'")."""

from __future__ import annotations

from collections.abc import Callable


def row_id(minimum: int, name: str) -> Callable[[str], int]:
    """A database id (a PostgreSQL bigint) of at least ``minimum``."""

    def parse(text: str) -> int:
        value = int(text)
        if not minimum <= value < 2**63:
            raise ValueError
        return value

    parse.__name__ = name
    return parse
