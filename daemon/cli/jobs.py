"""``gochatd jobs list|show|retry|cancel|delete|run-now|discard|bulk|prune``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from gochatd.cli.argtypes import after_id, job_id, job_ids, limit
from gochatd.cli.batches import links_json, print_links
from gochatd.cli.common import print_json, public, run_async, settings_from, with_client
from gochatd.cli.parsing import add_common, add_group, add_subcommands
from gochatd.client.client import Client
from gochatd.client.job_controls import cli_actor
from gochatd.client.validation import validate_filter, validate_selection
from gochatd.config.settings import Settings
from gochatd.loops.retention import RetentionPolicy, count_prunable, prune_once
from gochatd.model import Job, JobAction, JobAttempt, JobFilter, JobSelection, JobStatus
from gochatd.obs.logs import configure_logging

#: The one-job controls: each logs its job_control audit line (client/job_controls.py) on stderr.
_CONTROLS: dict[str, Callable[..., Awaitable[Job]]] = {
    "retry": Client.retry, "cancel": Client.cancel, "delete": Client.delete,
    "run-now": Client.run_now, "discard": Client.discard,
}


def add_parser(sub: Any) -> None:
    jobs_sub = add_subcommands(add_group(sub, "jobs", cmd_jobs, help="inspect and manage jobs"),
                               "jobs_command")
    ls = jobs_sub.add_parser("list")
    add_common(ls)
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
        p = jobs_sub.add_parser(name, help=_CONTROL_HELP.get(name))
        add_common(p)
        p.add_argument("id", type=job_id)
        if name == "show":
            p.add_argument("--json", action="store_true")
    _add_bulk_parser(jobs_sub)
    prune = jobs_sub.add_parser(
        "prune", help="delete finished jobs older than their retention (retention.* config)"
    )
    add_common(prune)
    prune.add_argument("--dry-run", action="store_true", help="only count what would go")


_CONTROL_HELP = {
    "delete": "delete a job in any status but running (cancel a running one first)",
    "run-now": "make a queued or retrying job that is not yet due due now",
    "discard": "make a queued or retrying job dead without running it",
}


def _add_bulk_parser(jobs_sub: Any) -> None:
    bulk = jobs_sub.add_parser(
        "bulk", help="one control over every job of --ids and/or the filters (at least one)")
    add_common(bulk)
    bulk.add_argument("action", choices=[a.value for a in JobAction] + ["run-now"])
    bulk.add_argument("--status", choices=[s.value for s in JobStatus])
    bulk.add_argument("--queue")
    bulk.add_argument("--type", dest="job_type")
    bulk.add_argument("--tenant")
    bulk.add_argument("--ids", type=job_ids, metavar="ID,ID,...")


def cmd_jobs(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    command = args.jobs_command
    # The controls' audit lines are info events; nothing else here logs below a warning.
    controls = command in _CONTROLS or command == "bulk"
    configure_logging(settings.log_level if controls else "warning", "json")

    # Refused before any database is opened.
    flt = None
    if command == "list":
        flt = validate_filter(JobFilter(
            status=JobStatus(args.status) if args.status else None, queue=args.queue,
            tenant_id=args.tenant, job_type=args.job_type, limit=args.limit,
            after_id=args.after_id, newest_first=args.order == "newest", search=args.search,
        ))
    selection = _selection(args) if command == "bulk" else None

    async def run(client: Client) -> int:
        if flt is not None:
            jobs = await client.list_jobs(flt)
            if args.json:
                print_json([public(j) for j in jobs])
            else:
                _print_table(jobs)
            return 0
        if args.jobs_command == "show":
            return await _show(client, args.id, as_json=args.json)
        if args.jobs_command == "prune":
            return await _prune(client, settings, dry_run=args.dry_run)
        if selection is not None:
            action = JobAction(args.action.replace("-", "_"))
            print_json((await client.bulk(action, selection, actor=cli_actor())).to_dict())
            return 0
        job = await _CONTROLS[command](client, args.id, actor=cli_actor())
        print_json({"id": job.id, "deleted": True} if command == "delete" else public(job))
        return 0

    return run_async(lambda: with_client(settings, run))


def _selection(args: argparse.Namespace) -> JobSelection:
    return validate_selection(JobSelection(
        ids=args.ids, status=JobStatus(args.status) if args.status else None, queue=args.queue,
        job_type=args.job_type, tenant_id=args.tenant))


async def _show(client: Client, job_id: int, *, as_json: bool) -> int:
    """The job's fields, its dependencies, then its recorded runs, newest first (with
    ``--json``, one object: the job plus ``waits_on``, ``batch_id``, ``depends_on`` and
    ``attempt_history``)."""
    job = await client.get_job(job_id)
    if job is None:
        from gochatd.errors import JobNotFound

        raise JobNotFound(job_id)
    runs = await client.list_job_attempts(job_id)
    links = await client.job_links(job_id, with_results=False)  # docs/workflows.md
    if as_json:
        print_json({**public(job), **(links_json(links) if links else {}),
                    "attempt_history": [a.to_dict() for a in runs]})
        return 0
    for key, value in public(job).items():
        shown = isinstance(value, dict) or key == "result"  # JSON as stored (docs/results.md)
        print(f"{key:18} {json.dumps(value, ensure_ascii=False) if shown else value}")
    if links is not None:
        print_links(links)
    _print_attempts(runs)
    return 0


def _print_attempts(runs: Sequence[JobAttempt]) -> None:
    print()
    if not runs:
        print("attempts: none recorded")
        return
    print(f"{'ATTEMPT':>7}  {'OUTCOME':13} {'STARTED':29} {'TOOK_S':>8}  {'WORKER':24} ERROR")
    for run in runs:
        took = (f"{(run.finished_at - run.started_at).total_seconds():.3f}"
                if run.started_at and run.finished_at else "-")
        started = run.started_at.isoformat(timespec="milliseconds") if run.started_at else "-"
        error = ": ".join(part for part in (run.error_class, run.error) if part) or "-"
        print(f"{run.attempt:>7}  {run.outcome:13} {started:29} {took:>8}  "
              f"{run.worker or '-':24} {error}")


async def _prune(client: Client, settings: Settings, *, dry_run: bool) -> int:
    """Prints ``{"dry_run": …, "completed": n, "dead": n, "cancelled": n}`` (classes kept
    forever are left out)."""
    assert client.store is not None
    policy = RetentionPolicy.from_settings(settings)
    counts = await (count_prunable(client.store, policy) if dry_run
                    else prune_once(client.store, policy))
    print_json({"dry_run": dry_run, **{status.value: n for status, n in counts.items()}})
    return 0


def _print_table(jobs: Sequence[Job]) -> None:
    print(f"{'ID':>8}  {'STATUS':10} {'QUEUE':14} {'TENANT':12} {'ATT':>7}  JOB TYPE")
    for j in jobs:
        attempts = f"{j.attempts}/{j.max_attempts}"
        print(f"{j.id:>8}  {j.status:10} {j.queue:14} {j.tenant_id[:12]:12} {attempts:>7}  {j.job_type}")
