"""``gochatd jobs list|show|retry|cancel|delete|run-now|discard|bulk|prune``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Sequence

from gochatd.client import Client
from gochatd.commands.common import print_json, public, run_async, settings_from, with_client
from gochatd.config import Settings
from gochatd.job_controls import cli_actor
from gochatd.logs import configure_logging
from gochatd.loops.retention import RetentionPolicy, count_prunable, prune_once
from gochatd.model import Job, JobAction, JobAttempt, JobFilter, JobSelection, JobStatus
from gochatd.validation import validate_filter, validate_selection

#: The one-job controls: each logs its job_control audit line (job_controls.py) on stderr.
_CONTROLS: dict[str, Callable[..., Awaitable[Job]]] = {
    "retry": Client.retry, "cancel": Client.cancel, "delete": Client.delete,
    "run-now": Client.run_now, "discard": Client.discard,
}


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
    """The job's fields, then its recorded runs, newest first (with ``--json``, one object:
    the job plus ``attempt_history``, as ``GET /v1/jobs/<id>``)."""
    job = await client.get_job(job_id)
    if job is None:
        from gochatd.errors import JobNotFound

        raise JobNotFound(job_id)
    runs = await client.list_job_attempts(job_id)
    if as_json:
        print_json({**public(job), "attempt_history": [a.to_dict() for a in runs]})
        return 0
    for key, value in public(job).items():
        print(f"{key:18} {json.dumps(value) if isinstance(value, dict) else value}")
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
