"""The ``gochatd`` command line: the parser, the dispatch and the one-line errors. Each
subcommand's work is in ``gochatd.commands`` (and the modules those call).

Exit codes: 0 success, 1 runtime error, 2 usage/config/input error (one line on stderr);
130 Ctrl-C; 141 (128 + SIGPIPE, as git and coreutils) when the reader of stdout went away
(``gochatd jobs list | head -2``), quietly.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import gochatd
from gochatd.argtypes import (
    after_id,
    iso_time,
    job_id,
    job_ids,
    limit,
    nonneg_float,
    positive_float,
    positive_int,
)
from gochatd.commands.common import UsageError
from gochatd.commands.enqueue import cmd_enqueue
from gochatd.commands.features import (
    cmd_bench,
    cmd_db,
    cmd_gateway,
    cmd_migrate,
    cmd_outbox,
    cmd_periodic,
)
from gochatd.commands.jobs import cmd_jobs
from gochatd.commands.serve import cmd_config, cmd_serve
from gochatd.errors import GochatdError, UserError
from gochatd.model import JobAction, JobStatus

#: argparse's message for a value its ``type=`` refused; reworded to read naturally.
_INVALID_VALUE = re.compile(r"^argument (?P<arg>.+?): invalid (?P<type>.+) value: (?P<value>.*)$",
                            re.DOTALL)
_TYPE_NAMES = {"int": "an integer", "float": "a number"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        match = _INVALID_VALUE.match(message)
        if match:  # "invalid a job id value: 'x'" -> "expected a job id, got 'x'"
            expected = _TYPE_NAMES.get(match["type"], match["type"])
            message = f"argument {match['arg']}: expected {expected}, got {match['value']}"
        raise UsageError(f"{message} (see '{self.prog} --help')")


#: The flags every database command takes, before or after the subcommand (after wins).
_COMMON_FLAGS = {"--config": "config", "--database-url": "database_url",
                 "--redis-url": "redis_url"}


def _add_common(p: argparse.ArgumentParser, *, dest_prefix: str = "") -> None:
    p.add_argument("--config", metavar="FILE", dest=f"{dest_prefix}config",
                   help="YAML config file (default /etc/gochatd/gochatd.yaml if present)")
    p.add_argument("--database-url", metavar="URL", dest=f"{dest_prefix}database_url",
                   help="postgresql://… or sqlite:///path")
    p.add_argument("--redis-url", metavar="URL", dest=f"{dest_prefix}redis_url",
                   help="redis://…; empty for none")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gochatd", description="Durable background-job worker daemon.")
    parser.add_argument("--version", action="version", version=f"gochatd {gochatd.__version__}")
    _add_common(parser, dest_prefix="global_")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    serve = sub.add_parser("serve", help="run the worker daemon (the default)")
    _add_serve_args(serve)
    _add_enqueue_args(sub.add_parser("enqueue", help="enqueue one job and print it as JSON"))
    _add_jobs_parser(sub)

    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True, parser_class=_Parser)
    up = db_sub.add_parser("upgrade", help="apply pending migrations (safe to repeat)")
    _add_common(up)

    cfg = sub.add_parser("config", help="configuration")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, parser_class=_Parser)
    check = cfg_sub.add_parser("check", help="print the effective config, secrets masked")
    _add_serve_args(check)

    _add_gateway_parser(sub)
    _add_periodic_parser(sub)

    from gochatd.outbox.cli import add_outbox_parser

    add_outbox_parser(sub, _Parser, _add_common, {"limit": limit})

    from gochatd.migrate.cli import add_migrate_parser

    add_migrate_parser(sub, _Parser)

    _add_bench_args(sub.add_parser("bench", help="measure every row of the target table"))
    return parser


def _add_enqueue_args(enq: argparse.ArgumentParser) -> None:
    _add_common(enq)
    enq.add_argument("job_type")
    enq.add_argument("--payload", default="{}", help="JSON object, or @file")
    enq.add_argument("--queue")
    enq.add_argument("--tenant", default="default")
    enq.add_argument("--idempotency-key")
    when = enq.add_mutually_exclusive_group()
    when.add_argument("--delay", type=nonneg_float, metavar="SECONDS")
    when.add_argument("--at", type=iso_time, metavar="ISO8601")
    enq.add_argument("--max-attempts", type=int)
    enq.add_argument("--priority", type=int, default=0)
    enq.add_argument("--traceparent")
    enq.add_argument("--unique-for", type=nonneg_float, metavar="SECONDS",
                     help="unique job: return the existing job of the same key while it "
                          "waits or runs, and for SECONDS after its enqueue (docs/unique-jobs.md)")
    enq.add_argument("--unique-key", metavar="KEY",
                     help="unique job's key (default with --unique-for: type and payload)")


def _add_jobs_parser(sub: Any) -> None:
    jobs = sub.add_parser("jobs", help="inspect and manage jobs")
    jobs_sub = jobs.add_subparsers(dest="jobs_command", required=True, parser_class=_Parser)
    ls = jobs_sub.add_parser("list")
    _add_common(ls)
    ls.add_argument("--status", choices=[s.value for s in JobStatus])
    ls.add_argument("--queue")
    ls.add_argument("--tenant")
    ls.add_argument("--type", dest="job_type")
    ls.add_argument("--limit", type=limit, default=10_000, help="at most this many (default 10000)")
    ls.add_argument("--after-id", type=after_id, help="the cursor: the last id of a page")
    ls.add_argument("--order", choices=["oldest", "newest"], default="oldest")
    ls.add_argument("--search", help="an id, or text in the type, tenant or payload")
    ls.add_argument("--json", action="store_true")
    for name in ("show", "retry", "cancel", "delete", "run-now", "discard"):
        p = jobs_sub.add_parser(name, help=_JOB_CONTROLS.get(name))
        _add_common(p)
        p.add_argument("id", type=job_id)
        if name == "show":
            p.add_argument("--json", action="store_true")
    _add_jobs_bulk_parser(jobs_sub)
    prune = jobs_sub.add_parser(
        "prune", help="delete finished jobs older than their retention (retention.* config)"
    )
    _add_common(prune)
    prune.add_argument("--dry-run", action="store_true", help="only count what would go")


_JOB_CONTROLS = {
    "delete": "delete a job in any status but running (cancel a running one first)",
    "run-now": "make a queued or retrying job that is not yet due due now",
    "discard": "make a queued or retrying job dead without running it",
}


def _add_jobs_bulk_parser(jobs_sub: Any) -> None:
    bulk = jobs_sub.add_parser(
        "bulk", help="one control over every job of --ids and/or the filters (at least one)")
    _add_common(bulk)
    bulk.add_argument("action", choices=[a.value for a in JobAction] + ["run-now"])
    bulk.add_argument("--status", choices=[s.value for s in JobStatus])
    bulk.add_argument("--queue")
    bulk.add_argument("--type", dest="job_type")
    bulk.add_argument("--tenant")
    bulk.add_argument("--ids", type=job_ids, metavar="ID,ID,...")


def _add_gateway_parser(sub: Any) -> None:
    gw = sub.add_parser("gateway", help="the gateway's tenant API keys")
    gw_sub = gw.add_subparsers(dest="gateway_command", required=True, parser_class=_Parser)
    hk = gw_sub.add_parser("hash-key", help="print the config hash of a key read from stdin, "
                           "or of a new one (--generate)")
    hk.add_argument("--generate", action="store_true", help="make a new random key")
    hk.add_argument("--tenant", help="also print the gateway.keys config entry for this tenant")


def _add_periodic_parser(sub: Any) -> None:
    per = sub.add_parser("periodic", help="periodic jobs")
    per_sub = per.add_subparsers(dest="periodic_command", required=True, parser_class=_Parser)
    pls = per_sub.add_parser("list", help="each periodic job with its schedule and next runs")
    _add_common(pls)
    pls.add_argument("--handlers", metavar="MODULES", help="modules that declare @gochatd.periodic")
    pls.add_argument("--count", type=limit, default=3, help="next run times to show (default 3)")
    pls.add_argument("--json", action="store_true")


def _add_bench_args(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("--scenario", metavar="S[,S…]",
                       help="throughput, latency, daemon, runtimes, backlog, soak, idle-in-tx, "
                       "migrate or all (default: throughput,latency,daemon,runtimes; with --smoke: all)")
    bench.add_argument("--backend", metavar="B[,B…]", default="all",
                       help="sqlite, postgres (polling), postgres+redis, postgres+redis-cluster "
                       "(a 3-master cluster of its own) or all (default); pgbouncer, "
                       "pgbouncer+redis: through a pgbouncer (not in all)")
    bench.add_argument("--pgbouncer", action="store_true",
                       help="throughput also through a pgbouncer (transaction mode) started "
                       "for the run, beside each PostgreSQL backend (docs/pgbouncer.md)")
    bench.add_argument("--smoke", action="store_true",
                       help="every scenario at a tiny size (a check, not a measurement)")
    bench.add_argument("--jobs", type=positive_int, help="jobs per throughput run (10000)")
    bench.add_argument("--soak-jobs", type=positive_int, help="soak length (1000000)")
    bench.add_argument("--backlog-jobs", type=positive_int, help="big backlog (1000000)")
    bench.add_argument("--migrate-jobs", type=positive_int,
                       help="jobs the migrate scenario moves SQLite -> PostgreSQL (1000000)")
    bench.add_argument("--idle-tx-minutes", type=positive_float,
                       help="how long the idle-in-transaction holder holds (10)")
    bench.add_argument("--idle-tx-rate", type=positive_float,
                       help="jobs/s offered during idle-in-tx (1000)")
    bench.add_argument("--concurrency", type=positive_int, default=50)
    bench.add_argument("--producers", type=positive_int, default=8)
    bench.add_argument("--database-url", help="PostgreSQL server (scratch databases are "
                       "created on it and dropped afterwards)")
    bench.add_argument("--redis", metavar="URL", default="",
                       help="Redis for postgres+redis (default redis://127.0.0.1:6379/0; "
                       "streams use a private prefix, deleted afterwards)")
    bench.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    bench.add_argument("--profile", metavar="FILE",
                       help="write a pyinstrument profile of one drain (needs pyinstrument)")
    bench.add_argument("--budget-md", metavar="FILE",
                       help="budget: write its tables into the section of FILE "
                       "(docs/benchmarks.md) that holds them")


def _add_serve_args(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument("--worker-only", action="store_true", help="run the worker loops only")
    p.add_argument("--handlers", metavar="MODULES", help="comma-separated handler modules")
    p.add_argument("--queues", metavar="Q[=W],…", help="queues to serve, with weights")
    p.add_argument("--concurrency", metavar="N", help="handler slots")
    p.add_argument("--migrate", action="store_true", help="apply migrations at start")
    p.add_argument("--admin-listen", metavar="HOST:PORT|off",
                   help="admin API and dashboard address (default 127.0.0.1:8410)")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": cmd_serve,
    "enqueue": cmd_enqueue,
    "jobs": cmd_jobs,
    "db": cmd_db,
    "config": cmd_config,
    "bench": cmd_bench,
    "gateway": cmd_gateway,
    "periodic": cmd_periodic,
    "outbox": cmd_outbox,
    "migrate": cmd_migrate,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
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
    return COMMANDS[args.command](args)


def _with_command(argv: list[str]) -> list[str]:
    """``serve`` is the default command: ``gochatd``, ``gochatd --worker-only …`` and
    ``gochatd --database-url X …`` all serve. The common flags may come first."""
    i = 0
    while i < len(argv) and argv[i].split("=", 1)[0] in _COMMON_FLAGS:
        i += 1 if "=" in argv[i] else 2
    if i > len(argv):
        return argv  # a common flag without its value: argparse says so
    rest = argv[i:]
    if not rest or (rest[0].startswith("-") and rest[0] not in ("-h", "--help", "--version")):
        return [*argv[:i], "serve", *rest]
    return argv


def _merge_common_flags(args: argparse.Namespace) -> None:
    """The common flags given before the subcommand, where the subcommand left them unset."""
    for flag, name in _COMMON_FLAGS.items():
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
