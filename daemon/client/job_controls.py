"""An operator's job controls as the clients, the command line and the admin API run them:
the store's guarded operation, then one ``job_control`` log line, the audit (who, what,
when, what came of it; never a payload). docs/operations.md, "Job controls".

The actor is who asked: ``"client"`` for the Python clients (unless the caller names
itself), ``"cli <user>@<host>"`` for the command line, ``"admin <peer address>"`` for the
admin API (never its token).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from gochatd.client.validation import validate_selection
from gochatd.errors import InvalidTransition, JobNotFound
from gochatd.model import BulkResult, Job, JobAction, JobSelection
from gochatd.obs.logs import get_logger
from gochatd.store import JobStore

#: How many of a bulk control's ids its audit line lists (the count is always there).
AUDIT_IDS = 100

CLIENT_ACTOR = "client"


def cli_actor() -> str:
    """The command line's actor: the OS user and the host."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a bare container)
        user = f"uid {os.getuid()}"
    return f"cli {user}@{socket.gethostname()}"


def admin_actor(peer: str | None) -> str:
    """The admin API's actor: its peer's address (a Unix socket has none)."""
    return f"admin {peer}" if peer else "admin"


async def retry(store: JobStore, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
    """Dead or cancelled -> queued, attempts reset (the store's ``requeue_job``)."""
    return await _one(JobAction.RETRY, job_id, actor, lambda: _changed(store.requeue_job(job_id)))


async def cancel(store: JobStore, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
    return await _one(JobAction.CANCEL, job_id, actor, lambda: _changed(store.cancel_job(job_id)))


async def delete(store: JobStore, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
    """The job's row goes (any status but running); returns it as it was."""
    return await _one(JobAction.DELETE, job_id, actor, lambda: _changed(store.delete_job(job_id)))


async def discard(store: JobStore, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
    return await _one(JobAction.DISCARD, job_id, actor,
                      lambda: _changed(store.discard_job(job_id)))


async def run_now(store: JobStore, job_id: int, *, actor: str = CLIENT_ACTOR) -> Job:
    return await _one(JobAction.RUN_NOW, job_id, actor, lambda: store.run_job_now(job_id))


async def bulk(store: JobStore, action: JobAction, selection: JobSelection, *,
               actor: str = CLIENT_ACTOR, filter_rules: bool = True) -> BulkResult:
    """A control over every job of ``selection`` (validated first: ``InvalidJob``; see
    ``validate_selection`` for ``filter_rules``)."""
    validate_selection(selection, filter_rules=filter_rules)
    return audit_bulk(action, selection, actor, await store.control_jobs(action, selection))


def audit_bulk(action: JobAction, selection: JobSelection, actor: str,
               result: BulkResult) -> BulkResult:
    """A bulk control's audit line (``SyncClient`` validates and runs it itself)."""
    scope: dict[str, Any] = {"filter": selection.filters()}
    if selection.ids is not None:
        scope.update(ids=list(selection.ids[:AUDIT_IDS]), ids_count=len(selection.ids))
    _audit(action, actor, "changed" if result.changed else "unchanged", matched=result.matched,
           changed=result.changed, **scope)
    return result


async def _changed(operation: Awaitable[Job]) -> tuple[Job, bool]:
    return await operation, True


async def _one(action: JobAction, job_id: int, actor: str,
               operation: Callable[[], Awaitable[tuple[Job, bool]]]) -> Job:
    with _refusals(action, job_id, actor):
        job, changed = await operation()
    return _done(action, actor, job_id, job, changed)


def one_sync(action: JobAction, job_id: int, actor: str,
             operation: Callable[[], tuple[Job, bool]]) -> Job:
    """``SyncClient``'s control of one job: the store's unit, then the same audit."""
    with _refusals(action, job_id, actor):
        job, changed = operation()
    return _done(action, actor, job_id, job, changed)


@contextlib.contextmanager
def _refusals(action: JobAction, job_id: int, actor: str) -> Iterator[None]:
    try:
        yield
    # A refusal changed nothing and is the caller's error to report (the command line's one
    # line on stderr, the admin API's 404/409): audited at debug level only.
    except JobNotFound:
        _audit(action, actor, "not_found", job_id=job_id, matched=0, changed=0, level="debug")
        raise
    except InvalidTransition:
        _audit(action, actor, "refused", job_id=job_id, matched=1, changed=0, level="debug")
        raise


def _done(action: JobAction, actor: str, job_id: int, job: Job, changed: bool) -> Job:
    _audit(action, actor, "changed" if changed else "unchanged", job_id=job_id, matched=1,
           changed=int(changed), status=job.status.value)
    return job


def _audit(action: JobAction, actor: str, outcome: str, *, level: str = "info",
           **fields: Any) -> None:
    log = get_logger(component="job_control")
    (log.debug if level == "debug" else log.info)(
        "job_control", action=action.value, actor=actor, outcome=outcome,
        at=datetime.now(UTC).isoformat(), **fields)
