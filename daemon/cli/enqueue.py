"""``gochatd enqueue``: one job, printed as JSON; ``--depends-on`` makes it wait for others
(docs/workflows.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gochatd.cli.argtypes import iso_time, job_ids, nonneg_float
from gochatd.cli.common import (
    UsageError,
    print_json,
    public,
    run_async,
    settings_from,
    with_client,
)
from gochatd.cli.parsing import add_common, add_group
from gochatd.client import workflows
from gochatd.client.client import Client
from gochatd.client.validation import validate_enqueue
from gochatd.errors import JobNotFound
from gochatd.model import Job
from gochatd.obs.logs import configure_logging
from gochatd.worker.registry import REGISTRY


def add_parser(sub: Any) -> None:
    enq = add_group(sub, "enqueue", cmd_enqueue, help="enqueue one job and print it as JSON")
    add_common(enq)
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
    enq.add_argument("--depends-on", type=job_ids, metavar="ID[,ID...]",
                     help="start once these jobs (of the same tenant) completed; cancelled if "
                          "one ends dead or cancelled (docs/workflows.md)")
    enq.add_argument("--run-if-failed", action="store_true",
                     help="with --depends-on: run once they all finished, however")


def cmd_enqueue(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    configure_logging("warning", "json")
    payload = _load_payload(args.payload)
    fields: dict[str, Any] = {
        "queue": args.queue, "tenant_id": args.tenant, "idempotency_key": args.idempotency_key,
        "delay_s": args.delay, "scheduled_at": args.at, "max_attempts": args.max_attempts,
        "priority": args.priority, "traceparent": args.traceparent,
        "unique_for_s": args.unique_for, "unique_key": args.unique_key,
    }
    # Bad input is named before any database is looked for.
    request = validate_enqueue(args.job_type, payload, **fields,
                               max_payload_bytes=settings.worker_max_payload_bytes)
    if args.run_if_failed and not args.depends_on:
        raise UsageError("--run-if-failed: only with --depends-on")
    if args.depends_on:
        workflows.dependent(request, args.depends_on, args.run_if_failed)  # no --delay …
        fields.update(depends_on=args.depends_on, run_if_failed=args.run_if_failed)

    async def run(client: Client) -> int:
        try:
            job = await client.enqueue(args.job_type, payload, **fields)
        except JobNotFound as exc:  # a dependency: missing, or another tenant's
            raise UsageError(f"--depends-on: {exc}") from None
        print_json(public(job))
        if args.queue is None or args.max_attempts is None:  # both given: nothing to say
            await _warn_if_unpublished(client, job, queue_given=args.queue is not None,
                                       attempts_given=args.max_attempts is not None)
        return 0

    return run_async(lambda: with_client(settings, run))


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


async def _warn_if_unpublished(client: Client, job: Job, *, queue_given: bool,
                               attempts_given: bool) -> None:
    """A type no daemon has published (docs/job-types.md): not an error, but say where the
    job went, since no daemon may serve that queue or know the type (a typo?). Only about
    the options the user left out; the advice names those."""
    assert client.store is not None
    if REGISTRY.get(job.job_type) is not None:
        return
    if any(t.job_type == job.job_type for t in await client.store.list_job_types()):
        return
    if queue_given:
        went, missing = f"the job got max_attempts {job.max_attempts}", "--max-attempts"
    elif attempts_given:
        went, missing = f"the job went to queue {job.queue!r}", "--queue"
    else:
        went = f"the job went to queue {job.queue!r} with max_attempts {job.max_attempts}"
        missing = "--queue and --max-attempts"
    sys.stderr.write(
        f"gochatd: warning: no daemon has published job type {job.job_type!r} yet, so "
        f"{went}; start a daemon that has its handler once, or pass {missing}\n")
