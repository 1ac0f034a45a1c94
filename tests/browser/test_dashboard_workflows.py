"""Dependent jobs and batches in the dashboard (docs/workflows.md, "In the dashboard"), in a
real headless Chromium against a real ``gochatd`` process, on SQLite and on PostgreSQL: a
callback's drawer shows its batch's progress and its dependencies, each dependency opens its
job, and a job held on its dependencies reads "waiting on dependencies", not 9999-12-31."""

from __future__ import annotations

import trio
from playwright.sync_api import expect

import gochatd
from gochatd.client.client import Client
from gochatd.workflows.model import EnqueuedBatch
from tests.browser.support import ARTIFACTS, Dash

#: A queue the daemon does not read: a member put there waits as enqueued.
PARKED = "parked"
WAITING = "waiting on dependencies"


def enqueue_batch(dash: Dash) -> EnqueuedBatch:
    async def run() -> EnqueuedBatch:
        async with Client(dash.db_url, None) as client:
            return await client.batch(
                [gochatd.NewJob("sys:noop", {"n": 1}),
                 gochatd.NewJob("sys:noop", {"n": 2}, queue=PARKED)],
                on_success=gochatd.NewJob("sys:noop", {"on": "success"}),
                on_complete=gochatd.NewJob("sys:noop", {"on": "complete"}))

    return trio.run(run)


def test_a_callbacks_drawer_shows_its_batch_and_its_dependencies(dash: Dash) -> None:
    batch = enqueue_batch(dash)
    done, parked = (j.id for j in batch.jobs)
    assert batch.on_success is not None and batch.on_complete is not None
    on_success, on_complete = batch.on_success.id, batch.on_complete.id
    dash.wait_job(done, "completed")
    dash.refresh()

    # The Scheduled tab lists the held callbacks: they wait on the batch, they are not
    # scheduled for 9999-12-31, and "Run now" (which would run them first) is off.
    dash.tab("scheduled")
    expect(dash.testid(f"scheduled-runs-at-{on_complete}")).to_have_text(WAITING)
    expect(dash.testid(f"scheduled-run-now-{on_complete}")).to_be_disabled()
    dash.testid(f"scheduled-select-{on_complete}").check()
    dash.testid("scheduled-bulk-run-now").click()
    expect(dash.message("info", "Not run: the jobs selected wait on their dependencies")
           ).to_be_visible()
    assert dash.job(on_complete)["waits_on"] == 1
    dash.open_job(dash.testid(f"scheduled-row-{on_complete}"), on_complete)
    expect(dash.testid("detail-field-scheduled_at")).to_have_text(WAITING)
    expect(dash.testid("detail-run-now")).to_be_hidden()

    # Its batch: 1 of 2 members finished, the counts, both callbacks with their status.
    expect(dash.testid("detail-batch")).to_be_visible()
    expect(dash.testid("detail-batch-title")).to_have_text(
        f"Batch {batch.id} (this job is its on_complete)")
    expect(dash.testid("detail-batch-progress")).to_have_text("1 / 2 finished")
    expect(dash.testid("detail-batch-count-completed")).to_have_text("completed 1")
    expect(dash.testid("detail-batch-count-queued")).to_have_text("queued 1")
    expect(dash.testid("detail-callback-on-success-status")).to_have_text("queued")
    expect(dash.testid("detail-callback-on-complete-open")).to_have_text(f"#{on_complete}")

    # Its dependencies: every member, with its status; waiting on the one not finished.
    expect(dash.testid("detail-waits-on")).to_have_text("waiting on 1 · 1 of 2 finished")
    expect(dash.testid(f"detail-dep-{done}-status")).to_have_text("completed")
    expect(dash.testid(f"detail-dep-{parked}-status")).to_have_text("queued")
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    dash.page.screenshot(path=str(shots / f"dashboard-batch-callback-{dash.backend}.png"))

    # A dependency opens its job: a member, in the same batch, waiting on nothing.
    dash.testid(f"detail-dep-{parked}-open").click()
    expect(dash.testid("detail-title")).to_have_text(f"Job {parked}")
    expect(dash.testid("detail-batch-title")).to_have_text(f"Batch {batch.id}")
    expect(dash.testid("detail-deps-block")).to_be_hidden()

    # The last member ends cancelled: on_success is cancelled, on_complete runs.
    dash.post(f"/v1/jobs/{parked}/cancel")
    dash.wait_job(on_complete, "completed")
    dash.wait_job(on_success, "cancelled")
    dash.refresh()
    expect(dash.testid("detail-batch-progress")).to_have_text("2 / 2 finished (done)")
    expect(dash.testid("detail-batch-count-cancelled")).to_have_text("cancelled 1")
    expect(dash.testid("detail-callback-on-success-status")).to_have_text("cancelled")
    dash.testid("detail-callback-on-complete-open").click()
    expect(dash.testid("detail-title")).to_have_text(f"Job {on_complete}")
    expect(dash.testid("detail-status")).to_have_text("completed")
    expect(dash.testid("detail-waits-on")).to_have_text("not waiting · 2 of 2 finished")
    expect(dash.testid(f"detail-dep-{parked}-status")).to_have_text("cancelled")
    expect(dash.testid("detail-field-scheduled_at")).not_to_have_text(WAITING)


def test_a_held_job_in_the_jobs_tab(dash: Dash) -> None:
    """A plain depends_on: the Jobs tab and the drawer say what it waits for."""
    [parent] = dash.enqueue("sys:noop", [{}], queue=PARKED)
    [child] = dash.enqueue("sys:noop", [{}], depends_on=[parent])
    dash.refresh()
    dash.tab("jobs")
    expect(dash.testid(f"job-scheduled-{child}")).to_have_text(WAITING)
    dash.open_job(dash.testid(f"job-row-{child}"), child)
    expect(dash.testid("detail-waits-on")).to_have_text("waiting on 1 · 0 of 1 finished")
    expect(dash.testid("detail-batch")).to_be_hidden()
    dash.testid(f"detail-dep-{parent}-open").click()
    expect(dash.testid("detail-title")).to_have_text(f"Job {parent}")
    expect(dash.testid("detail-deps-block")).to_be_hidden()
