"""What every command group's parser shares: the parser class whose errors read as one line
(exit 2), the common database flags, and the subcommand seam each group adds its parser
through (``add_parser(sub)``, with ``set_defaults(handler=…)``; see ``program.GROUPS``)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any, NoReturn

from gochatd.cli.common import UsageError

#: argparse's message for a value its ``type=`` refused; reworded to read naturally.
_INVALID_VALUE = re.compile(r"^argument (?P<arg>.+?): invalid (?P<type>.+) value: (?P<value>.*)$",
                            re.DOTALL)
_TYPE_NAMES = {"int": "an integer", "float": "a number"}

#: A command's work: the parsed arguments in, the exit code out.
Handler = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        match = _INVALID_VALUE.match(message)
        if match:  # "invalid a job id value: 'x'" -> "expected a job id, got 'x'"
            expected = _TYPE_NAMES.get(match["type"], match["type"])
            message = f"argument {match['arg']}: expected {expected}, got {match['value']}"
        raise UsageError(f"{message} (see '{self.prog} --help')")


#: The flags every database command takes, before or after the subcommand (after wins).
COMMON_FLAGS = {"--config": "config", "--database-url": "database_url",
                "--redis-url": "redis_url"}


def add_common(p: argparse.ArgumentParser, *, dest_prefix: str = "") -> None:
    p.add_argument("--config", metavar="FILE", dest=f"{dest_prefix}config",
                   help="YAML config file (default /etc/gochatd/gochatd.yaml if present)")
    p.add_argument("--database-url", metavar="URL", dest=f"{dest_prefix}database_url",
                   help="postgresql://… or sqlite:///path")
    p.add_argument("--redis-url", metavar="URL", dest=f"{dest_prefix}redis_url",
                   help="redis://…; empty for none")


def add_group(sub: Any, name: str, handler: Handler, **kwargs: Any) -> argparse.ArgumentParser:
    """One command group's parser under ``gochatd``, run by ``handler``."""
    parser: argparse.ArgumentParser = sub.add_parser(name, **kwargs)
    parser.set_defaults(handler=handler)
    return parser


def add_subcommands(parser: argparse.ArgumentParser, dest: str) -> Any:
    """A group's own subcommands (``jobs list``, ``outbox show`` …), one of them required."""
    return parser.add_subparsers(dest=dest, required=True, parser_class=Parser)
