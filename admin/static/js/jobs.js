// The Jobs tab: search (id, job type, tenant, payload text), filters, newest first, paged
// with the cursor ("More").

import {
  $, ago, api, clearMessage, el, fail, features, firstLine, fmtCount, query, setBadge,
  setText, showMessage, syncRows, describe,
} from "./core.js";
import { detail, selectJob } from "./lists.js";
import { runsAt } from "./workflows.js";

const PAGE = 50;
const MAX_PAGE = 500;

const state = {
  jobs: [],
  nextCursor: null,
  filters: {},
  generation: 0,
  loadingMore: false,
};

function buildJobRow(job) {
  const tr = el("tr", { class: "clickable", tabindex: "0", testid: "job-row-" + job.id });
  const c = (tr._c = {});
  c.id = el("td", { class: "num mono" });
  c.status = el("span", { class: "badge", testid: "job-status-" + job.id });
  c.type = el("td", { class: "mono" });
  c.queue = el("td");
  c.tenant = el("td");
  c.attempts = el("td", { class: "num" });
  c.scheduled = el("td", { testid: "job-scheduled-" + job.id });
  c.updated = el("td");
  c.error = el("td", { class: "err" });
  tr.append(c.id, el("td", {}, c.status), c.type, c.queue, c.tenant, c.attempts, c.scheduled, c.updated, c.error);
  tr.addEventListener("click", () => selectJob(tr._job.id).catch((err) => fail(err, "load job " + tr._job.id)));
  tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter") tr.click(); });
  return tr;
}

function updateJobRow(tr, job) {
  const c = tr._c;
  tr._job = job;
  tr.classList.toggle("selected", job.id === detail.id);
  setText(c.id, job.id);
  setBadge(c.status, job.status);
  setText(c.type, job.job_type);
  setText(c.queue, job.queue);
  setText(c.tenant, job.tenant_id);
  setText(c.attempts, job.attempts + " / " + job.max_attempts);
  // A queued or retrying job not yet due says when it runs (it is not "queued" in the sense
  // of waiting for a worker).
  const pending = job.status === "queued" || job.status === "retrying";
  const future = pending && job.scheduled_at && Date.parse(job.scheduled_at) > Date.now() + 1000;
  setText(c.scheduled, future ? runsAt(job) : "—");
  setText(c.updated, ago(job.updated_at));
  setText(c.error, firstLine(job.last_error));
  c.error.title = job.last_error || "";
}

function render() {
  syncRows($("jobs-body"), state.jobs, (j) => j.id, buildJobRow, updateJobRow);
  $("jobs-empty").hidden = state.jobs.length > 0;
  $("jobs-more").hidden = !state.nextCursor;
  setText($("jobs-count"), state.jobs.length ? fmtCount(state.jobs.length) + " shown" + (state.nextCursor ? ", more available" : "") : "");
}

function jobsQuery(extra) {
  return "v1/jobs" + query({ ...state.filters, ...extra });
}

// Reloads the pages already shown (or the first page) from the start. state.generation
// changes whenever the filters change or "More" adds a page: an answer to an older request
// is dropped.
export async function loadJobs() {
  if (state.loadingMore || state.jobs.length > MAX_PAGE) return;
  const generation = state.generation;
  const limit = Math.min(MAX_PAGE, Math.max(PAGE, state.jobs.length));
  const data = await api("GET", jobsQuery({ limit }));
  if (generation !== state.generation || state.loadingMore) return;
  state.jobs = data.jobs || [];
  state.nextCursor = data.next_cursor;
  render();
}

async function loadMore(button) {
  if (!state.nextCursor || state.loadingMore) return;
  state.loadingMore = true;
  button.disabled = true;
  const generation = state.generation;
  try {
    const data = await api("GET", jobsQuery({ limit: PAGE, cursor: state.nextCursor }));
    if (generation === state.generation) {
      const known = new Set(state.jobs.map((j) => j.id));
      state.jobs = state.jobs.concat((data.jobs || []).filter((j) => !known.has(j.id)));
      state.nextCursor = data.next_cursor;
      state.generation += 1;
      render();
    }
  } catch (err) {
    fail(err, "load more jobs");
  } finally {
    state.loadingMore = false;
    button.disabled = false;
  }
}

function readFilters() {
  const f = {
    status: $("filter-status").value,
    queue: $("filter-queue").value,
    tenant: $("filter-tenant").value.trim(),
    job_type: $("filter-type").value.trim(),
  };
  if (features.jobParams.has("q")) f.q = $("search-input").value.trim();
  if (features.jobParams.has("order")) f.order = $("filter-order").value;
  return f;
}

export async function applyFilters() {
  state.filters = readFilters();
  state.generation += 1;
  state.jobs = [];
  state.nextCursor = null;
  state.loadingMore = false;
  render();
  try {
    await loadJobs();
    clearMessage("filters");
  } catch (err) {
    showMessage("error", "Job list: " + describe(err), { key: "filters" });
  }
}

// Shows the jobs of one status (the Overview's counts link here).
export function showStatus(status) {
  $("filter-status").value = status;
  return applyFilters();
}

// The search and order controls appear where the daemon's job list takes q= and order=.
export function setupJobs() {
  const search = features.jobParams.has("q");
  const order = features.jobParams.has("order");
  $("search-label").hidden = !search;
  $("order-label").hidden = !order;
  setText($("jobs-note"), (order ? "newest first by default" : "oldest first") + "; click a row for details");
  state.filters = readFilters();
}

export function wireJobs() {
  $("jobs-filters").addEventListener("submit", (ev) => { ev.preventDefault(); applyFilters(); });
  for (const id of ["filter-status", "filter-queue", "filter-order"]) $(id).addEventListener("change", applyFilters);
  $("filter-reset").addEventListener("click", () => {
    for (const id of ["search-input", "filter-status", "filter-queue", "filter-tenant", "filter-type"]) $(id).value = "";
    $("filter-order").value = "newest";
    applyFilters();
  });
  $("jobs-more").addEventListener("click", (ev) => loadMore(ev.currentTarget));
}
