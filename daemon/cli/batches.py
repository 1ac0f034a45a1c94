"""``gochatd batches show ID``, and the dependencies ``gochatd jobs show`` prints
(docs/workflows.md)."""

from __future__ import annotations

import argparse
from typing import Any

from gochatd.cli.argtypes import row_id
from gochatd.cli.common import UsageError, print_json, run_async, settings_from, with_client
from gochatd.cli.parsing import add_common, add_group, add_subcommands
from gochatd.client.client import Client
from gochatd.errors import UserError
from gochatd.model import Job
from gochatd.obs.logs import configure_logging
from gochatd.workflows.model import Batch, JobLinks

batch_id = row_id(1, "a batch id")


def add_parser(sub: Any) -> None:
    group = add_group(sub, "batches", cmd_batches,
                      help="inspect batches of jobs (docs/workflows.md)")
    batches_sub = add_subcommands(group, "batches_command")
    show = batches_sub.add_parser("show", help="a batch's size, members by status and callbacks")
    add_common(show)
    show.add_argument("id", type=batch_id)
    show.add_argument("--json", action="store_true")


def cmd_batches(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    configure_logging("warning", "json")
    if args.batches_command != "show":  # argparse allows only the listed subcommands
        raise UsageError(f"unknown batches command {args.batches_command!r}")

    async def run(client: Client) -> int:
        batch = await client.get_batch(args.id)
        if batch is None:
            raise UserError(f"batch {args.id} not found")  # exit 2, as a missing job
        callbacks = {name: None if job_id is None else await client.get_job(job_id)
                     for name, job_id in (("on_success", batch.on_success_id),
                                          ("on_complete", batch.on_complete_id))}
        if args.json:
            print_json(batch_json(batch, callbacks))
        else:
            print_batch(batch, callbacks)
        return 0

    return run_async(lambda: with_client(settings, run))


def batch_json(batch: Batch, callbacks: dict[str, Job | None]) -> dict[str, Any]:
    """``Batch.to_dict`` plus each callback's id and status (null: none, or pruned)."""
    return {**batch.to_dict(), "callbacks": {
        name: None if job is None else {"id": job.id, "status": job.status.value,
                                        "job_type": job.job_type}
        for name, job in callbacks.items()}}


def print_batch(batch: Batch, callbacks: dict[str, Job | None]) -> None:
    print(f"{'id':18} {batch.id}")
    print(f"{'tenant_id':18} {batch.tenant_id}")
    print(f"{'created_at':18} {batch.created_at.isoformat()}")
    print(f"{'size':18} {batch.size}")
    print(f"{'finished':18} {batch.finished} of {batch.size}"
          + (" (done)" if batch.finished >= batch.size else ""))
    counts = ", ".join(f"{status} {n}" for status, n in sorted(batch.counts.items()))
    print(f"{'counts':18} {counts or '-'}")
    for name, job_id in (("on_success", batch.on_success_id),
                         ("on_complete", batch.on_complete_id)):
        job = callbacks.get(name)
        if job_id is None:
            shown = "-"
        elif job is None:
            shown = f"job {job_id} (pruned)"
        else:
            shown = f"job {job.id} {job.status.value} ({job.job_type})"
        print(f"{name:18} {shown}")


def links_json(links: JobLinks) -> dict[str, Any]:
    """What ``jobs show --json`` adds: ``waits_on``, ``batch_id`` and ``depends_on``, each
    dependency without its result (``jobs show`` of that job has it)."""
    out = links.to_dict()
    out["depends_on"] = [{k: v for k, v in d.items() if k != "result"}
                         for d in out["depends_on"]]
    return out


def print_links(links: JobLinks) -> None:
    """The text ``jobs show`` prints after the job's fields."""
    print()
    batch = f"; batch {links.batch_id}" if links.batch_id is not None else ""
    if not links.dependencies:
        print(f"dependencies: none{batch}")
        return
    print(f"dependencies: {len(links.dependencies)}, waits on {links.waits_on}{batch}")
    print(f"{'ID':>8}  {'STATUS':10} {'RUN_IF_FAILED':13}  RESOLVED")
    for dep in links.dependencies:
        print(f"{dep.job_id:>8}  {dep.status.value:10} {_yes(dep.run_if_failed):13}  "
              f"{_yes(dep.resolved)}")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
