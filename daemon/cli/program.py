"""The ``gochatd`` command line: the list of command groups, the dispatch and the one-line
errors. Each group registers its own parser and handler: the core groups in ``gochatd.cli``,
a feature's in its folder (``gateway/cli.py``, ``outbox/cli.py`` …); see ``GROUPS``.

Exit codes: 0 success, 1 runtime error, 2 usage/config/input error (one line on stderr);
130 Ctrl-C; 141 (128 + SIGPIPE, as git and coreutils) when the reader of stdout went away
(``gochatd jobs list | head -2``), quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import sys
from collections.abc import Sequence

import gochatd
from gochatd.cli.common import UsageError
from gochatd.cli.parsing import COMMON_FLAGS, Handler, Parser, add_common
from gochatd.errors import GochatdError, UserError
from gochatd.obs import otel

__all__ = ["GROUPS", "UsageError", "build_parser", "main"]

#: The command groups, in ``gochatd --help`` order. Each module has ``add_parser(sub)``, which
#: adds its group's parser with ``set_defaults(handler=…)``: the function that runs it.
GROUPS = (
    "gochatd.cli.serve",            # serve (the default command)
    "gochatd.cli.enqueue",          # enqueue
    "gochatd.cli.jobs",             # jobs list|show|retry|cancel|delete|run-now|discard|bulk|prune
    "gochatd.cli.batches",          # batches show
    "gochatd.cli.db",               # db upgrade
    "gochatd.cli.config",           # config check
    "gochatd.gateway.cli",          # gateway hash-key
    "gochatd.periodic_jobs.cli",    # periodic list
    "gochatd.outbox.cli",           # outbox list|show|retry
    "gochatd.migrate.cli",          # move (also spelled migrate) plan|copy|…
    "gochatd.cli.bench",            # bench
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="gochatd", description="Durable background-job worker daemon.")
    parser.add_argument("--version", action="version", version=f"gochatd {gochatd.__version__}")
    add_common(parser, dest_prefix="global_")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for name in GROUPS:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        with otel.exporting_from_env():  # OTEL_TRACES_EXPORTER: the SDK, flushed at exit
            code = _dispatch(parser, argv)
        sys.stdout.flush()  # inside the try: a reader gone shows here for short outputs
        return code
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise
        return _stdout_gone()
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            return _interrupted()
        if any(isinstance(leaf, BrokenPipeError) for leaf in leaves) and _stdout_reader_gone():
            return _stdout_gone()
        ours = [leaf for leaf in leaves if isinstance(leaf, GochatdError)]
        if ours and len(ours) == len(leaves):
            # Several loops may trip over the same cause: the user's error is the news.
            users = [leaf for leaf in ours if isinstance(leaf, UserError)]
            return _report((users or ours)[0])
        raise
    except GochatdError as exc:
        return _report(exc)
    except KeyboardInterrupt:
        return _interrupted()


#: The reader of stdout went away: the shell's code for a death by SIGPIPE.
STDOUT_GONE = 141


def _stdout_reader_gone() -> bool:
    """stdout is a pipe or socket whose reader closed it (not some other broken pipe)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _fd, events in poll.poll(0))
    except (OSError, ValueError):
        return False


def _stdout_gone() -> int:
    """``gochatd jobs list | head -2``: ``head`` has what it wanted and left. No traceback,
    no line: stdout goes to /dev/null so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return STDOUT_GONE


def _interrupted() -> int:
    """Ctrl-C: one line, the shell's exit code for SIGINT, no traceback."""
    sys.stderr.write("gochatd: interrupted\n")
    return 130


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def _report(exc: GochatdError) -> int:
    sys.stderr.write(f"gochatd: {exc}\n")
    return 2 if isinstance(exc, UserError) else 1


def _dispatch(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    args = parser.parse_args(_with_command(argv))
    _merge_common_flags(args)
    handler: Handler = args.handler
    del args.handler
    return handler(args)


def _with_command(argv: list[str]) -> list[str]:
    """``serve`` is the default command: ``gochatd``, ``gochatd --worker-only …`` and
    ``gochatd --database-url X …`` all serve. The common flags may come first."""
    i = 0
    while i < len(argv) and argv[i].split("=", 1)[0] in COMMON_FLAGS:
        i += 1 if "=" in argv[i] else 2
    if i > len(argv):
        return argv  # a common flag without its value: argparse says so
    rest = argv[i:]
    if not rest or (rest[0].startswith("-") and rest[0] not in ("-h", "--help", "--version")):
        return [*argv[:i], "serve", *rest]
    return argv


def _merge_common_flags(args: argparse.Namespace) -> None:
    """The common flags given before the subcommand, where the subcommand left them unset."""
    for flag, name in COMMON_FLAGS.items():
        value = getattr(args, f"global_{name}")
        delattr(args, f"global_{name}")
        if value is None:
            continue
        if not hasattr(args, name):
            raise UsageError(f"{flag} does not apply to 'gochatd {args.command}' "
                             "(see 'gochatd --help')")
        if getattr(args, name) is None:
            setattr(args, name, value)


if __name__ == "__main__":
    sys.exit(main())
