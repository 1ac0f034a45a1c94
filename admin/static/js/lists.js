// The job tabs (Busy, Scheduled, Retries, Dead), their per-row and bulk controls, and the job
// detail drawer with the attempts and the controls valid for the job's status.

import {
  $, act, ago, api, el, enc, fail, features, firstLine, fmtCount, fmtDuration, info, query,
  secondsSince, serves, setBadge, setText, syncRows,
} from "./core.js";
import { WAITING, isHeld, loadBatch, renderDependencies, runsAt } from "./workflows.js";

const LIST_LIMIT = 100;
const PENDING = new Set(["queued", "retrying"]);

// Every control on a job: its route (hidden when this daemon does not serve it), the statuses
// it is valid for, and the request it makes.
export const ACTIONS = {
  run_now: {
    label: "Run now", cls: "primary", method: "post", route: "/v1/jobs/{job_id}/run-now",
    // Not a job held on its dependencies: it would run before them.
    valid: (j) => PENDING.has(j.status) && !isHeld(j),
    call: (id) => api("POST", "v1/jobs/" + enc(id) + "/run-now"),
    done: (j) => "Job " + j.id + " runs now",
  },
  retry: {
    label: "Retry", cls: "primary", method: "post", route: "/v1/jobs/{job_id}/retry",
    valid: (j) => j.status === "dead" || j.status === "cancelled",
    call: (id) => api("POST", "v1/jobs/" + enc(id) + "/retry"),
    done: (j) => "Job " + j.id + " is " + j.status + " again",
  },
  discard: {
    label: "Discard", cls: "warn", method: "post", route: "/v1/jobs/{job_id}/discard",
    valid: (j) => PENDING.has(j.status),
    call: (id) => api("POST", "v1/jobs/" + enc(id) + "/discard"),
    done: (j) => "Job " + j.id + " discarded (dead without running)",
  },
  cancel: {
    label: "Cancel", cls: "danger", method: "post", route: "/v1/jobs/{job_id}/cancel",
    valid: (j) => (PENDING.has(j.status) || j.status === "running") && !j.cancel_requested,
    call: (id) => api("POST", "v1/jobs/" + enc(id) + "/cancel"),
    done: (j) => j.status === "cancelled" ? "Job " + j.id + " cancelled"
      : "Cancel requested for job " + j.id + " (it is " + j.status + ")",
  },
  delete: {
    label: "Delete", cls: "danger", method: "delete", route: "/v1/jobs/{job_id}",
    valid: (j) => j.status !== "running", confirm: true,
    call: (id) => api("DELETE", "v1/jobs/" + enc(id)),
    done: (r) => "Job " + r.id + " deleted",
  },
};

const offered = (name) => serves(ACTIONS[name].route, ACTIONS[name].method);
const bulkOffered = (kind) => (serves("/v1/jobs/bulk", "post") ? KINDS[kind].bulk : []);

export function runAction(name, id, button) {
  const a = ACTIONS[name];
  if (a.confirm && !window.confirm(a.label + " job " + id + "? This cannot be undone.")) return Promise.resolve();
  return act(button, a.label.toLowerCase() + " job " + id, async () => a.done(await a.call(id)));
}

const BULK_LABEL = { retry: "Retry", delete: "Delete", discard: "Discard", run_now: "Run now", cancel: "Cancel" };

// -- the four tabs -----------------------------------------------------------------------------

const elapsed = (j) => fmtDuration(secondsSince(j.locked_at || j.updated_at));

export const KINDS = {
  busy: {
    title: "Busy", note: "running now, fleet-wide; elapsed since the claim",
    params: { status: "running" }, actions: ["cancel"], bulk: [],
    columns: [["Worker", (j) => j.locked_by || "—", "mono"], ["Elapsed", elapsed, "num"],
              ["Lease until", (j) => ago(j.lease_expires_at)]],
    empty: "Nothing is running.",
  },
  scheduled: {
    title: "Scheduled", note: "queued or retrying jobs not yet due, soonest first",
    params: { scheduled: "true" }, actions: ["run_now", "delete"], bulk: ["run_now", "delete"],
    columns: [["Status", null, "badge"], ["Runs at", runsAt]],
    empty: "No scheduled jobs.",
  },
  retries: {
    title: "Retries", note: "failed, waiting for their next attempt",
    params: { status: "retrying" }, actions: ["run_now", "discard", "delete"],
    bulk: ["run_now", "discard", "delete"],
    columns: [["Next retry", runsAt], ["Error class", (j) => j.error_class || "—", "mono"],
              ["Last error", (j) => firstLine(j.last_error) || "—", "err"]],
    empty: "No jobs are waiting to retry.",
  },
  dead: {
    title: "Dead", note: "out of attempts or not retryable",
    params: { status: "dead" }, actions: ["retry", "delete"], bulk: ["retry", "delete"],
    columns: [["Failed", (j) => ago(j.failed_at || j.updated_at)], ["Error class", (j) => j.error_class || "—", "mono"],
              ["Last error", (j) => firstLine(j.last_error) || "—", "err"]],
    empty: "No dead jobs.",
  },
};

const selected = Object.fromEntries(Object.keys(KINDS).map((k) => [k, new Set()]));
const shown = Object.fromEntries(Object.keys(KINDS).map((k) => [k, []]));

export function kindAvailable(kind) {
  return kind !== "scheduled" || features.jobParams.has("scheduled");
}

export function buildKindPanel(kind) {
  const k = KINDS[kind];
  const panel = $("panel-" + kind);
  const bulk = bulkOffered(kind);
  const head = el("div", { class: "panel-head" }, [
    el("h2", { text: k.title }),
    el("span", { class: "note", id: kind + "-summary", testid: kind + "-summary", text: k.note }),
  ]);
  if (kind === "dead") {
    head.append(el("div", { class: "actions" }, el("button", {
      type: "button", class: "primary", id: "retry-all-dead", testid: "retry-all-dead",
      title: "Queue every dead job again", text: "Retry all dead",
      onclick: (ev) => act(ev.currentTarget, "retry all dead jobs", async () => {
        const r = await api("POST", "v1/jobs/retry", {});
        return r.retried === 1 ? "1 dead job queued again" : fmtCount(r.retried) + " dead jobs queued again";
      }),
    })));
  }
  panel.append(head);
  if (bulk.length) {
    const bar = el("div", { class: "bulk", testid: kind + "-bulk" }, [
      el("span", { id: kind + "-selected", testid: kind + "-selected", text: "none selected" }),
    ]);
    for (const name of bulk) {
      bar.append(el("button", {
        type: "button", class: "small " + (ACTIONS[name].cls || ""), testid: kind + "-bulk-" + name.replace("_", "-"),
        text: BULK_LABEL[name] + " selected", disabled: true,
        onclick: (ev) => bulkAction(kind, name, ev.currentTarget),
      }));
    }
    panel.append(bar);
  }
  const headCells = [];
  if (bulk.length) {
    headCells.push(el("th", { class: "check" }, el("input", {
      type: "checkbox", testid: kind + "-select-all", "aria-label": "Select every job shown",
      onchange: (ev) => selectAll(kind, ev.currentTarget.checked),
    })));
  }
  headCells.push(el("th", { class: "num", text: "Id" }), el("th", { text: "Type" }), el("th", { text: "Queue" }),
                 el("th", { text: "Tenant" }), el("th", { class: "num", text: "Attempts" }),
                 ...k.columns.map(([label, , cls]) => el("th", { class: cls === "num" ? "num" : null, text: label })),
                 el("th"));
  panel.append(el("div", { class: "table-wrap" }, el("table", { testid: kind + "-table" }, [
    el("thead", {}, el("tr", {}, headCells)), el("tbody", { id: kind + "-body" }),
  ])));
  panel.append(el("p", { class: "empty", id: kind + "-empty", testid: kind + "-empty", text: k.empty, hidden: true }));
}

function buildRow(kind, job) {
  const k = KINDS[kind];
  const tr = el("tr", { class: "clickable", tabindex: "0", testid: kind + "-row-" + job.id });
  const c = (tr._c = { cols: [] });
  if (bulkOffered(kind).length) {
    c.check = el("input", {
      type: "checkbox", testid: kind + "-select-" + job.id, "aria-label": "Select job " + job.id,
      onclick: (ev) => ev.stopPropagation(),
      onchange: (ev) => toggleSelected(kind, tr._job.id, ev.currentTarget.checked),
    });
    tr.append(el("td", { class: "check" }, c.check));
  }
  c.id = el("td", { class: "num mono" });
  c.type = el("td", { class: "mono" });
  c.queue = el("td");
  c.tenant = el("td");
  c.attempts = el("td", { class: "num" });
  tr.append(c.id, c.type, c.queue, c.tenant, c.attempts);
  for (const [label, , cls] of k.columns) {
    const testid = kind + "-" + label.toLowerCase().replace(/ /g, "-") + "-" + job.id;
    const inner = cls === "badge" ? el("span", { class: "badge", testid }) : null;
    const td = el("td", { class: cls === "badge" ? null : cls, testid: inner ? null : testid }, inner);
    c.cols.push(inner || td);
    tr.append(td);
  }
  c.buttons = {};
  const actions = el("td", { class: "actions" });
  for (const name of k.actions.filter(offered)) {
    c.buttons[name] = el("button", {
      type: "button", class: "small " + (ACTIONS[name].cls || ""),
      testid: kind + "-" + name.replace("_", "-") + "-" + job.id, text: ACTIONS[name].label,
      onclick: (ev) => { ev.stopPropagation(); runAction(name, tr._job.id, ev.currentTarget); },
    });
    actions.append(c.buttons[name]);
  }
  tr.append(actions);
  tr.addEventListener("click", () => selectJob(tr._job.id).catch((err) => fail(err, "load job " + tr._job.id)));
  tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter") tr.click(); });
  return tr;
}

function updateRow(kind, tr, job) {
  const c = tr._c;
  tr._job = job;
  tr.classList.toggle("selected", job.id === detail.id);
  if (c.check) c.check.checked = selected[kind].has(job.id);
  setText(c.id, job.id);
  setText(c.type, job.job_type);
  setText(c.queue, job.queue);
  setText(c.tenant, job.tenant_id);
  setText(c.attempts, job.attempts + " / " + job.max_attempts);
  KINDS[kind].columns.forEach(([, fn, cls], i) => {
    if (cls === "badge") setBadge(c.cols[i], job.status);
    else setText(c.cols[i], fn(job));
    if (cls === "err") c.cols[i].title = job.last_error || "";
  });
  for (const [name, button] of Object.entries(c.buttons)) {
    button.disabled = !ACTIONS[name].valid(job);
  }
}

export async function loadKind(kind) {
  const data = await api("GET", "v1/jobs" + query({ ...KINDS[kind].params, limit: LIST_LIMIT }));
  const jobs = data.jobs || [];
  shown[kind] = jobs;
  const ids = new Set(jobs.map((j) => j.id));
  for (const id of Array.from(selected[kind])) if (!ids.has(id)) selected[kind].delete(id);
  syncRows($(kind + "-body"), jobs, (j) => j.id, (j) => buildRow(kind, j), (tr, j) => updateRow(kind, tr, j));
  $(kind + "-empty").hidden = jobs.length > 0;
  setText($(kind + "-summary"), KINDS[kind].note + " · " + fmtCount(jobs.length) + (data.next_cursor ? "+ shown (the first " + LIST_LIMIT + ")" : " shown"));
  if (kind === "dead") $("retry-all-dead").disabled = jobs.length === 0;
  syncBulk(kind);
}

function syncBulk(kind) {
  const label = $(kind + "-selected");
  if (!label) return;
  const n = selected[kind].size;
  setText(label, n ? n + " selected" : "none selected");
  for (const b of $("panel-" + kind).querySelectorAll(".bulk button")) b.disabled = n === 0;
  const all = $("panel-" + kind).querySelector("th.check input");
  all.checked = n > 0 && n === shown[kind].length;
  all.indeterminate = n > 0 && n < shown[kind].length;
}

function toggleSelected(kind, id, on) {
  if (on) selected[kind].add(id); else selected[kind].delete(id);
  syncBulk(kind);
}

function selectAll(kind, on) {
  selected[kind] = new Set(on ? shown[kind].map((j) => j.id) : []);
  for (const tr of $(kind + "-body").children) if (tr._c.check) tr._c.check.checked = on;
  syncBulk(kind);
}

function bulkAction(kind, name, button) {
  // Run now leaves out jobs held on their dependencies: they would run before them.
  const held = new Set(name === "run_now" ? shown[kind].filter(isHeld).map((j) => j.id) : []);
  const ids = Array.from(selected[kind]).filter((id) => !held.has(id)).sort((a, b) => a - b);
  if (!ids.length && selected[kind].size) info("Not run: the jobs selected wait on their dependencies");
  if (!ids.length) return Promise.resolve();
  if (name === "delete" && !window.confirm("Delete " + ids.length + " jobs? This cannot be undone.")) return Promise.resolve();
  return act(button, BULK_LABEL[name].toLowerCase() + " " + ids.length + " jobs", async () => {
    const r = await api("POST", "v1/jobs/bulk", { action: name, ids });
    selected[kind].clear();
    return BULK_LABEL[name] + ": " + fmtCount(r.changed) + " of " + fmtCount(r.matched) + " jobs changed";
  });
}

// -- the job detail drawer ---------------------------------------------------------------------

const FIELD_ORDER = [
  "id", "status", "job_type", "queue", "tenant_id", "priority", "attempts", "max_attempts",
  "fence", "idempotency_key", "cancel_requested", "scheduled_at", "created_at", "updated_at",
  "dispatched_at", "locked_by", "locked_at", "lease_expires_at", "failed_at", "completed_at",
  "error_class", "last_error", "traceparent", "payload", "result",
];
const TIME_FIELDS = new Set([
  "scheduled_at", "created_at", "updated_at", "dispatched_at", "locked_at",
  "lease_expires_at", "failed_at", "completed_at",
]);
const DETAIL_ACTIONS = ["run_now", "retry", "discard", "cancel", "delete"];

export const detail = { id: null, job: null };

export function selectJob(id) {
  detail.id = id;
  for (const tr of document.querySelectorAll("tbody tr.clickable")) {
    tr.classList.toggle("selected", Boolean(tr._job) && tr._job.id === id);
  }
  setText($("detail-title"), "Job " + id);
  $("job-detail").hidden = false;
  return loadDetail(id);
}

export function closeDetail() {
  detail.id = null;
  detail.job = null;
  for (const tr of document.querySelectorAll("tr.selected")) tr.classList.remove("selected");
  $("job-detail").hidden = true;
}

function fieldValue(key, value, job) {
  if (value === null || value === undefined) return el("span", { class: "null", text: "null" });
  if (key === "payload" || key === "result") return el("span", { class: "null", text: "(shown above)" });
  if (Array.isArray(value) && (key === "attempt_history" || key === "depends_on")) {
    return el("span", { class: "null", text: value.length + " (listed above)" });
  }
  if (key === "scheduled_at" && isHeld(job)) return el("span", { title: String(value), text: WAITING });
  if (typeof value === "object") return el("span", { text: JSON.stringify(value) });
  if (TIME_FIELDS.has(key)) {
    return el("span", {}, [el("span", { text: String(value) }), " ",
                            el("span", { class: "ago", text: "(" + ago(value) + ")" })]);
  }
  return el("span", { text: String(value) });
}

function attemptRow(a) {
  const took = a.finished_at ? (Date.parse(a.finished_at) - Date.parse(a.started_at)) / 1000 : null;
  const error = [a.error_class, firstLine(a.error)].filter(Boolean).join(": ");
  return el("tr", { testid: "attempt-row-" + a.attempt }, [
    el("td", { class: "num", text: a.attempt }),
    el("td", {}, el("span", { class: "badge st-" + (/^[a-z_]+$/.test(a.outcome || "") ? a.outcome : "unknown"), text: a.outcome || "running" })),
    el("td", { title: a.started_at || "", text: a.started_at ? ago(a.started_at) : "—" }),
    el("td", { class: "num", text: took === null || Number.isNaN(took) ? "—" : took < 10 ? took.toFixed(2) + "s" : fmtDuration(took) }),
    el("td", { class: "mono", text: a.worker || "—" }),
    el("td", { class: "err", title: a.error || "", text: error || "—" }),
  ]);
}

function renderDetail(job) {
  detail.job = job;
  setText($("detail-title"), "Job " + job.id);
  setBadge($("detail-status"), job.status);
  for (const name of DETAIL_ACTIONS) {
    const button = $("detail-" + name.replace("_", "-"));
    // Only the controls this daemon serves and the job's status allows.
    button.hidden = !offered(name) || !ACTIONS[name].valid(job);
    button.title = ACTIONS[name].label + " job " + job.id;
  }
  renderDependencies(job);
  $("detail-error-block").hidden = !(job.error_class || job.last_error);
  setText($("detail-error-class"), job.error_class || "—");
  setText($("detail-last-error"), job.last_error || "—");
  // The runs, newest first ("attempts" is the count; older daemons send no history).
  const attempts = Array.isArray(job.attempt_history) ? job.attempt_history : null;
  $("detail-attempts-block").hidden = attempts === null;
  if (attempts) $("detail-attempts-body").replaceChildren(...attempts.map(attemptRow));
  // What the handler returned (docs/results.md): shown once the job completed with one.
  const hasResult = job.result !== undefined && job.result !== null;
  $("detail-result-block").hidden = !hasResult;
  setText($("detail-result"), hasResult ? JSON.stringify(job.result, null, 2) : "");
  setText($("detail-payload"), JSON.stringify(job.payload === undefined ? null : job.payload, null, 2));
  const keys = FIELD_ORDER.filter((k) => k in job).concat(Object.keys(job).filter((k) => !FIELD_ORDER.includes(k)).sort());
  $("detail-fields").replaceChildren(...keys.map((key) => el("tr", { testid: "detail-row-" + key }, [
    el("td", { text: key }), el("td", { testid: "detail-field-" + key }, fieldValue(key, job[key], job)),
  ])));
}

export async function loadDetail(id) {
  try {
    const job = await api("GET", "v1/jobs/" + enc(id));
    if (detail.id !== id) return;
    renderDetail(job);
    await loadBatch(job);
  } catch (err) {
    if (err.status === 404 && detail.id === id) {
      closeDetail();  // deleted meanwhile
      return;
    }
    throw err;
  }
}

export function wireDetail() {
  $("detail-close").addEventListener("click", closeDetail);
  for (const name of DETAIL_ACTIONS) {
    $("detail-" + name.replace("_", "-")).addEventListener("click", (ev) => {
      if (detail.job) runAction(name, detail.job.id, ev.currentTarget);
    });
  }
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && detail.id !== null) closeDetail();
  });
}
