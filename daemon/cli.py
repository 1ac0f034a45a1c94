"""The ``gochatd`` command line. Subcommands only; the work lives in the modules they call.

Exit codes: 0 success, 1 runtime error, 2 usage/config/input error (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import trio

import gochatd
from gochatd.argtypes import row_id
from gochatd.client import Client, validate_enqueue, validate_filter
from gochatd.config import FIELDS, Settings, load_settings
from gochatd.errors import GochatdError, UserError
from gochatd.gateway.settings import check_gateway_keys
from gochatd.logs import configure_logging
from gochatd.loops.retention import RetentionPolicy, count_prunable, prune_once
from gochatd.model import Job, JobFilter, JobStatus
from gochatd.registry import REGISTRY, load_handler_modules
from gochatd.store import open_store
from gochatd.store.presence import require_database_file, require_schema


class UsageError(UserError):
    pass


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

    enq = sub.add_parser("enqueue", help="enqueue one job and print it as JSON")
    _add_common(enq)
    enq.add_argument("job_type")
    enq.add_argument("--payload", default="{}", help="JSON object, or @file")
    enq.add_argument("--queue")
    enq.add_argument("--tenant", default="default")
    enq.add_argument("--idempotency-key")
    when = enq.add_mutually_exclusive_group()
    when.add_argument("--delay", type=_nonneg_float, metavar="SECONDS")
    when.add_argument("--at", type=_iso_time, metavar="ISO8601")
    enq.add_argument("--max-attempts", type=int)
    enq.add_argument("--priority", type=int, default=0)
    enq.add_argument("--traceparent")

    jobs = sub.add_parser("jobs", help="inspect and manage jobs")
    jobs_sub = jobs.add_subparsers(dest="jobs_command", required=True, parser_class=_Parser)
    ls = jobs_sub.add_parser("list")
    _add_common(ls)
    ls.add_argument("--status", choices=[s.value for s in JobStatus])
    ls.add_argument("--queue")
    ls.add_argument("--tenant")
    ls.add_argument("--type", dest="job_type")
    ls.add_argument("--limit", type=_limit, default=10_000, help="at most this many (default 10000)")
    ls.add_argument("--after-id", type=_after_id)
    ls.add_argument("--json", action="store_true")
    for name in ("show", "retry", "cancel"):
        p = jobs_sub.add_parser(name)
        _add_common(p)
        p.add_argument("id", type=_job_id)
        if name == "show":
            p.add_argument("--json", action="store_true")
    prune = jobs_sub.add_parser(
        "prune", help="delete finished jobs older than their retention (retention.* config)"
    )
    _add_common(prune)
    prune.add_argument("--dry-run", action="store_true", help="only count what would go")

    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True, parser_class=_Parser)
    up = db_sub.add_parser("upgrade", help="apply pending migrations (safe to repeat)")
    _add_common(up)

    cfg = sub.add_parser("config", help="configuration")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, parser_class=_Parser)
    check = cfg_sub.add_parser("check", help="print the effective config, secrets masked")
    _add_serve_args(check)

    gw = sub.add_parser("gateway", help="the gateway's tenant API keys")
    gw_sub = gw.add_subparsers(dest="gateway_command", required=True, parser_class=_Parser)
    hk = gw_sub.add_parser("hash-key", help="print the config hash of a key read from stdin, "
                           "or of a new one (--generate)")
    hk.add_argument("--generate", action="store_true", help="make a new random key")
    hk.add_argument("--tenant", help="also print the gateway.keys config entry for this tenant")

    per = sub.add_parser("periodic", help="periodic jobs")
    per_sub = per.add_subparsers(dest="periodic_command", required=True, parser_class=_Parser)
    pls = per_sub.add_parser("list", help="each periodic job with its schedule and next runs")
    _add_common(pls)
    pls.add_argument("--handlers", metavar="MODULES", help="modules that declare @gochatd.periodic")
    pls.add_argument("--count", type=_limit, default=3, help="next run times to show (default 3)")
    pls.add_argument("--json", action="store_true")

    from gochatd.outbox.cli import add_outbox_parser

    add_outbox_parser(sub, _Parser, _add_common, {"limit": _limit})

    from gochatd.migrate.cli import add_migrate_parser

    add_migrate_parser(sub, _Parser)

    _add_bench_args(sub.add_parser("bench", help="measure every row of the target table"))
    return parser


def _add_bench_args(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("--scenario", metavar="S[,S…]",
                       help="throughput, latency, daemon, backlog, soak, idle-in-tx, migrate or all "
                       "(default: throughput,latency,daemon; with --smoke: all)")
    bench.add_argument("--backend", metavar="B[,B…]", default="all",
                       help="sqlite, postgres (polling), postgres+redis or all (default)")
    bench.add_argument("--smoke", action="store_true",
                       help="every scenario at a tiny size (a check, not a measurement)")
    bench.add_argument("--jobs", type=_positive_int, help="jobs per throughput run (10000)")
    bench.add_argument("--soak-jobs", type=_positive_int, help="soak length (1000000)")
    bench.add_argument("--backlog-jobs", type=_positive_int, help="big backlog (1000000)")
    bench.add_argument("--migrate-jobs", type=_positive_int,
                       help="jobs the migrate scenario moves SQLite -> PostgreSQL (1000000)")
    bench.add_argument("--idle-tx-minutes", type=_positive_float,
                       help="how long the idle-in-transaction holder holds (10)")
    bench.add_argument("--idle-tx-rate", type=_positive_float,
                       help="jobs/s offered during idle-in-tx (1000)")
    bench.add_argument("--concurrency", type=_positive_int, default=50)
    bench.add_argument("--producers", type=_positive_int, default=8)
    bench.add_argument("--database-url", help="PostgreSQL server (scratch databases are "
                       "created on it and dropped afterwards)")
    bench.add_argument("--redis", metavar="URL", default="",
                       help="Redis for postgres+redis (default redis://127.0.0.1:6379/0; "
                       "streams use a private prefix, deleted afterwards)")
    bench.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    bench.add_argument("--profile", metavar="FILE",
                       help="write a pyinstrument profile of one drain (needs pyinstrument)")


def _add_serve_args(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument("--worker-only", action="store_true", help="run the worker loops only")
    p.add_argument("--handlers", metavar="MODULES", help="comma-separated handler modules")
    p.add_argument("--queues", metavar="Q[=W],…", help="queues to serve, with weights")
    p.add_argument("--concurrency", metavar="N", help="handler slots")
    p.add_argument("--migrate", action="store_true", help="apply migrations at start")
    p.add_argument("--admin-listen", metavar="HOST:PORT|off",
                   help="admin API and dashboard address (default 127.0.0.1:8410)")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError
    return value


def _limit(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 10_000:
        raise ValueError
    return value


_job_id = row_id(1, "a job id")
_after_id = row_id(0, "a job id or 0")


def _nonneg_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError
    return value


def _iso_time(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError
    return value


for _fn, _name in ((_positive_int, "a positive integer"), (_limit, "an integer in 1..10000"),
                   (_nonneg_float, "a non-negative number of seconds"),
                   (_iso_time, "an ISO 8601 time with a zone, e.g. 2026-01-01T00:00:00Z")):
    _fn.__name__ = _name  # argparse names the expected type in its one-line error


def _settings(args: argparse.Namespace) -> Settings:
    flags = {
        "database_url": getattr(args, "database_url", None),
        "redis_url": getattr(args, "redis_url", None),
        "handlers": getattr(args, "handlers", None),
        "worker.queues": getattr(args, "queues", None),
        "worker.concurrency": getattr(args, "concurrency", None),
        "admin.listen": getattr(args, "admin_listen", None),
    }
    return load_settings(config_file=args.config, flags=flags)


def _run_async(fn: Callable[[], Awaitable[int]]) -> int:
    return trio.run(fn)


# -- commands --------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from gochatd.service import Worker

    settings = _settings(args)
    configure_logging(settings.log_level, settings.log_format)
    load_handler_modules(settings.handlers)
    reload_args = {"config_file": args.config, "flags": {
        "database_url": args.database_url, "redis_url": args.redis_url,
        "handlers": args.handlers, "worker.queues": args.queues,
        "worker.concurrency": args.concurrency, "admin.listen": args.admin_listen,
    }}
    if settings.admin_listen != "off":
        from gochatd.admin.server import check_admin_settings

        check_admin_settings(settings.admin_listen, settings.admin_token)
    check_gateway_keys(settings.gateway_keys, settings.admin_token)
    worker = Worker(settings, migrate=args.migrate, reload_args=reload_args,
                    gateway=not args.worker_only)
    return _run_async(lambda: worker.run(handle_signals=True))


async def _with_client(settings: Settings, fn: Callable[[Client], Awaitable[int]]) -> int:
    """Run ``fn`` with a client on the existing database (never one made here)."""
    require_database_file(settings.database_url)
    async with Client(
        settings.database_url, settings.redis_url or None,
        max_payload_bytes=settings.worker_max_payload_bytes,
        stream_prefix=settings.worker_redis_stream_prefix,
        consumer_group=settings.worker_redis_consumer_group,
    ) as client:
        assert client.store is not None
        await require_schema(client.store, settings.database_url)
        return await fn(client)


def _load_payload(text: str) -> dict[str, Any]:
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--payload: cannot read {text[1:]!r}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise UsageError(f"--payload: {text[1:]!r} is not UTF-8 text") from None
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--payload: not valid JSON ({exc.msg} at char {exc.pos})") from None
    except RecursionError:
        raise UsageError("--payload: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer longer than Python converts
        raise UsageError(f"--payload: not usable JSON ({str(exc)[:80]})") from None
    if not isinstance(payload, dict):
        raise UsageError(f"--payload: must be a JSON object, got {_json_kind(payload)}")
    return payload


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"


def cmd_enqueue(args: argparse.Namespace) -> int:
    settings = _settings(args)
    configure_logging("warning", "json")
    payload = _load_payload(args.payload)
    fields: dict[str, Any] = {
        "queue": args.queue, "tenant_id": args.tenant, "idempotency_key": args.idempotency_key,
        "delay_s": args.delay, "scheduled_at": args.at, "max_attempts": args.max_attempts,
        "priority": args.priority, "traceparent": args.traceparent,
    }
    # Bad input is named before any database is looked for.
    validate_enqueue(args.job_type, payload, **fields,
                     max_payload_bytes=settings.worker_max_payload_bytes)

    async def run(client: Client) -> int:
        job = await client.enqueue(args.job_type, payload, **fields)
        _print_json(_public(job))
        await _warn_if_unpublished(client, job)
        return 0

    return _run_async(lambda: _with_client(settings, run))


async def _warn_if_unpublished(client: Client, job: Job) -> None:
    """A type no daemon has published (docs/job-types.md): not an error, but say where the
    job went, since no daemon may serve that queue or know the type (a typo?)."""
    assert client.store is not None
    if REGISTRY.get(job.job_type) is not None:
        return
    if any(t.job_type == job.job_type for t in await client.store.list_job_types()):
        return
    sys.stderr.write(
        f"gochatd: warning: no daemon has published job type {job.job_type!r} yet, so the "
        f"job went to queue {job.queue!r} with max_attempts {job.max_attempts}; start a "
        "daemon that has its handler once, or pass --queue and --max-attempts\n")


def _public(job: Job) -> dict[str, Any]:
    return job.to_dict()


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")


def cmd_jobs(args: argparse.Namespace) -> int:
    settings = _settings(args)
    configure_logging("warning", "json")

    flt = None
    if args.jobs_command == "list":  # refused before any database is opened
        flt = validate_filter(JobFilter(
            status=JobStatus(args.status) if args.status else None, queue=args.queue,
            tenant_id=args.tenant, job_type=args.job_type, limit=args.limit,
            after_id=args.after_id,
        ))

    async def run(client: Client) -> int:
        if flt is not None:
            jobs = await client.list_jobs(flt)
            if args.json:
                _print_json([_public(j) for j in jobs])
            else:
                _print_table(jobs)
            return 0
        if args.jobs_command == "show":
            job = await client.get_job(args.id)
            if job is None:
                from gochatd.errors import JobNotFound

                raise JobNotFound(args.id)
            if args.json:
                _print_json(_public(job))
            else:
                for key, value in _public(job).items():
                    print(f"{key:18} {json.dumps(value) if isinstance(value, dict) else value}")
            return 0
        if args.jobs_command == "prune":
            return await _prune(client, settings, dry_run=args.dry_run)
        job = await (client.retry(args.id) if args.jobs_command == "retry" else client.cancel(args.id))
        _print_json(_public(job))
        return 0

    return _run_async(lambda: _with_client(settings, run))


async def _prune(client: Client, settings: Settings, *, dry_run: bool) -> int:
    """Prints ``{"dry_run": …, "completed": n, "dead": n, "cancelled": n}`` (classes kept
    forever are left out)."""
    assert client.store is not None
    policy = RetentionPolicy.from_settings(settings)
    counts = await (count_prunable(client.store, policy) if dry_run
                    else prune_once(client.store, policy))
    _print_json({"dry_run": dry_run, **{status.value: n for status, n in counts.items()}})
    return 0


def _print_table(jobs: Sequence[Job]) -> None:
    print(f"{'ID':>8}  {'STATUS':10} {'QUEUE':14} {'TENANT':12} {'ATT':>7}  JOB TYPE")
    for j in jobs:
        attempts = f"{j.attempts}/{j.max_attempts}"
        print(f"{j.id:>8}  {j.status:10} {j.queue:14} {j.tenant_id[:12]:12} {attempts:>7}  {j.job_type}")


def cmd_db(args: argparse.Namespace) -> int:
    settings = _settings(args)

    async def run() -> int:
        store = open_store(settings.database_url)
        await store.open()
        try:
            applied = await store.migrate()
        finally:
            await store.close()
        print("applied: " + ", ".join(applied) if applied else "schema is up to date")
        return 0

    return _run_async(run)


def cmd_config(args: argparse.Namespace) -> int:
    settings = _settings(args)
    load_handler_modules(settings.handlers)
    if settings.admin_listen != "off":  # what serve would refuse, check refuses too
        from gochatd.admin.server import check_admin_settings

        check_admin_settings(settings.admin_listen, settings.admin_token)
    check_gateway_keys(settings.gateway_keys, settings.admin_token)
    masked = settings.masked()
    width = max(len(k) for k in masked)
    for spec in FIELDS:
        value = masked[spec.key]
        shown = json.dumps(value) if not isinstance(value, str) else value
        source = settings.sources.get(spec.key, "default")
        flag = "" if spec.reloadable else "  (restart)"
        print(f"{spec.key:{width}}  {shown}  [{source}]{flag}")
    if settings.config_file:
        print(f"# config file: {settings.config_file}")
    unknown = settings.sources.get("_unknown_env")
    if unknown:
        print(f"# warning: unknown GOCHAT_ variables ignored: {unknown}")
    return 0


def cmd_gateway(args: argparse.Namespace) -> int:
    from gochatd.gateway.hash_key_cmd import main_hash_key

    return main_hash_key(args.generate, args.tenant)


def cmd_periodic(args: argparse.Namespace) -> int:
    from gochatd.periodic_jobs.listing import list_periodic

    settings = _settings(args)
    configure_logging("warning", "json")
    load_handler_modules(settings.handlers)

    async def run() -> int:
        listing = await list_periodic(settings, args.count)
        if args.json:
            _print_json(listing.to_dict())
        else:
            print("\n".join(listing.lines()))
        return 0

    return _run_async(run)


def cmd_outbox(args: argparse.Namespace) -> int:
    from gochatd.outbox.cli import run_outbox_command

    settings = _settings(args)
    configure_logging("warning", "json")
    return _run_async(lambda: run_outbox_command(args, settings))


def cmd_migrate(args: argparse.Namespace) -> int:
    from gochatd.migrate.cli import run_migrate_command

    configure_logging("warning", "json")
    return run_migrate_command(args)


def cmd_bench(args: argparse.Namespace) -> int:
    from gochatd.bench import run_bench

    configure_logging("error", "json")
    return _run_async(lambda: run_bench(args))


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
        return _dispatch(parser, argv)
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            return _interrupted()
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
