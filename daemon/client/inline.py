"""``gochatd.testing.inline()``'s seam in the clients: the run set for this task or thread
takes each new job at once, after its row commits (tests only; docs/testing.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

from gochatd.model import ClaimedJob, EnqueueResult, Finish, Job

if TYPE_CHECKING:
    from gochatd.store import JobStore
    from gochatd.workflows.model import JobLinks


class InlineHook(Protocol):
    """``gochatd.testing.inline()``'s run: checked before a write, called after it."""

    def check(self) -> None: ...
    def __call__(self, store: JobStore, results: Sequence[EnqueueResult]) -> Awaitable[None]: ...
    def run_workflow(self, store: JobStore, results: Sequence[EnqueueResult]) -> Awaitable[None]: ...
    def check_sync(self) -> None: ...
    def run_sync(self, store: SyncInlineStore, results: Sequence[EnqueueResult]) -> None: ...
    def run_workflow_sync(self, store: SyncInlineStore,
                          results: Sequence[EnqueueResult]) -> None: ...


class SyncInlineStore(Protocol):
    """What ``SyncClient`` lends an inline run: the store's units for one new job."""

    def claim_jobs(self, job: Job, owner: str, lease_s: float) -> list[ClaimedJob]: ...
    def finish_jobs(self, job: Job, finish: Finish) -> set[int]: ...
    def get_job(self, job_id: int) -> Job | None: ...
    def job_links(self, job_id: int) -> JobLinks | None: ...


#: Set by ``gochatd.testing.inline()``: new jobs then run at once, after their rows commit.
INLINE: ContextVar[InlineHook | None] = ContextVar("gochatd_inline", default=None)


def inline_hook() -> InlineHook | None:
    """The run that takes this task's new jobs (``Client``), checked before anything is
    written."""
    hook = INLINE.get()
    if hook is not None:
        hook.check()
    return hook


def inline_hook_sync() -> InlineHook | None:
    """The same for ``SyncClient`` (this thread's run)."""
    hook = INLINE.get()
    if hook is not None:
        hook.check_sync()
    return hook


__all__ = ["INLINE", "InlineHook", "SyncInlineStore", "inline_hook", "inline_hook_sync"]
