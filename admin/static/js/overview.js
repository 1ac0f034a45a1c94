// The Overview tab: counts that add up, the throughput chart, this worker, the queues.

import {
  $, act, api, el, enc, fmtCount, fmtDuration, fmtTime, numCell, query, serves, setBadge,
  setText, syncRows,
} from "./core.js";
import { lineChart, sparkline, totals } from "./charts.js";

export const overview = { status: null, queues: [], counts: null };

// -- counts ------------------------------------------------------------------------------------

const STATUSES = ["queued", "running", "retrying", "completed", "dead", "cancelled"];

// The Queued card is what the queues' Queued column sums to (due now) and Scheduled what
// their Scheduled column sums to (queued, not yet due): the cards add up to Total.
export async function loadCounts() {
  if (!serves("/v1/jobs/counts")) return;
  const counts = await api("GET", "v1/jobs/counts");
  overview.counts = counts;
  $("counts").hidden = false;
  const split = typeof counts.delayed === "number";  // older daemons do not count it
  $("count-delayed-card").hidden = !split;
  const shown = { ...counts, queued: split ? counts.queued - counts.delayed : counts.queued };
  for (const s of STATUSES) setText(document.querySelector(`[data-testid="count-${s}"]`), fmtCount(shown[s]));
  const total = STATUSES.reduce((n, s) => n + (counts[s] || 0), 0);
  setText(document.querySelector('[data-testid="count-total"]'), fmtCount(total));
  setText(document.querySelector('[data-testid="count-delayed"]'), fmtCount(counts.delayed));
}

// -- throughput ----------------------------------------------------------------------------------

const CHART_MINUTES = 60;
// The narrowest window drawn: a daemon a few seconds old still gets a readable chart.
export const MIN_WINDOW_MINUTES = 5;

// The first point worth drawing: the hour, or less when it starts with empty minutes (a young
// fleet): from the first minute with a finish, at least MIN_WINDOW_MINUTES.
export function windowStart(points) {
  const first = points.findIndex((p) => (p.completed || 0) + (p.failed || 0) + (p.retried || 0) > 0);
  const latest = Math.max(0, points.length - MIN_WINDOW_MINUTES);
  return first < 0 ? latest : Math.min(first, latest);
}

function windowTitle(minutes) {
  return minutes >= CHART_MINUTES ? "last hour" : "last " + minutes + " minutes";
}

export async function loadThroughput() {
  if (!serves("/v1/stats/throughput")) return;
  $("throughput-panel").hidden = false;
  const by = $("chart-by").value;
  const data = await api("GET", "v1/stats/throughput" + query({ minutes: CHART_MINUTES, by }));
  const series = data.series || [];
  // The overall chart: the sum over the series (one series "all" when not split).
  const all = [];
  for (const s of series) {
    s.points.forEach((p, i) => {
      const q = all[i] || (all[i] = { minute: p.minute, completed: 0, failed: 0, retried: 0 });
      q.completed += p.completed || 0;
      q.failed += p.failed || 0;
      q.retried += p.retried || 0;
    });
  }
  const from = windowStart(all);
  const points = all.slice(from);
  setText($("chart-window"), windowTitle(points.length));
  $("chart-all").replaceChildren(lineChart(points));
  const t = totals(points);
  for (const k of Object.keys(t)) setText(document.querySelector(`[data-testid="chart-total-${k}"]`), fmtCount(t[k]));
  const split = Boolean(by);
  $("chart-series-wrap").hidden = !split;
  if (!split) return;
  setText($("series-key-head"), by === "queue" ? "Queue" : "Job type");
  setText($("series-window-head"), windowTitle(points.length));
  const rows = series.map((s) => ({ key: s.key, points: s.points.slice(from), t: totals(s.points) }))
    .sort((a, b) => (b.t.completed + b.t.failed) - (a.t.completed + a.t.failed) || String(a.key).localeCompare(String(b.key)));
  syncRows($("series-body"), rows, (r) => r.key, (r) => el("tr", { testid: "series-row-" + r.key }), (tr, r) => {
    tr.replaceChildren(
      el("td", { class: "mono", text: r.key }),
      el("td", { class: "num", testid: "series-completed-" + r.key, text: fmtCount(r.t.completed) }),
      el("td", { class: "num", testid: "series-failed-" + r.key, text: fmtCount(r.t.failed) }),
      el("td", { class: "num", testid: "series-retried-" + r.key, text: fmtCount(r.t.retried) }),
      el("td", { class: "spark" }, sparkline(r.points, r.key)),
    );
  });
}

// -- this worker -------------------------------------------------------------------------------

function workerState(s) {
  if (s.stopping) return "stopping";
  if (s.drained) return "drained";
  if (s.draining) return "draining";
  if (s.paused) return "paused";
  return "active";
}

export async function loadStatus() {
  const s = await api("GET", "v1/status");
  overview.status = s;
  setBadge($("status-state"), workerState(s));
  setText($("status-worker-id"), s.worker_id);
  setText($("status-mode"), s.mode);
  setText($("status-in-flight"), fmtCount(s.in_flight));
  setText($("status-concurrency"), fmtCount(s.concurrency));
  setText($("status-draining"), s.draining ? (s.drained ? "yes (drained)" : "yes") : "no");
  setText($("status-uptime"), fmtDuration(s.uptime_s));
  setText($("status-version"), s.version);
  setText($("status-paused-queues"), s.paused_queues && s.paused_queues.length ? s.paused_queues.join(", ") : "none");
  setText($("status-config-reloaded"), s.config_reloaded_at ? fmtTime(s.config_reloaded_at) : "never");
  const pending = s.pending_restart || [];
  $("status-pending-restart").hidden = $("status-pending-restart-label").hidden = pending.length === 0;
  setText($("status-pending-restart"), pending.join(", "));
  $("worker-drain").disabled = Boolean(s.draining || s.stopping);
  $("worker-resume").disabled = Boolean(s.stopping || !(s.draining || s.paused));
  setText($("header-worker"), s.worker_id + " · " + s.mode + " · v" + s.version);
  document.title = "gochatd · " + s.worker_id;
}

export function wireWorker() {
  $("worker-drain").addEventListener("click", (ev) => act(ev.currentTarget, "drain", async () => {
    await api("POST", "v1/drain");
    return "Draining: this worker claims no new jobs";
  }));
  $("worker-resume").addEventListener("click", (ev) => act(ev.currentTarget, "resume", async () => {
    await api("POST", "v1/resume");
    return "This worker claims jobs again";
  }));
}

// -- queues ------------------------------------------------------------------------------------

const COUNT_COLUMNS = ["queued", "delayed", "running", "retrying", "dead"];

function buildQueueRow(q) {
  const tr = el("tr", { testid: "queue-row-" + q.queue });
  const c = (tr._c = {});
  c.name = el("td", { class: "mono", testid: "queue-name-" + q.queue });
  c.state = el("span", { class: "badge", testid: "queue-state-" + q.queue });
  // Due jobs no live daemon can run (GET /v1/job-types, without_handler).
  c.nohandler = el("span", { class: "badge st-nohandler", testid: "queue-nohandler-" + q.queue });
  c.weight = el("td", { class: "num", testid: "queue-weight-" + q.queue });
  c.limit = el("td", { class: "num", testid: "queue-limit-" + q.queue });
  c.rate = el("td", { class: "num", testid: "queue-rate-" + q.queue });
  for (const col of COUNT_COLUMNS) c[col] = el("td", { class: "num", testid: "queue-" + col + "-" + q.queue });
  c.oldest = el("td", { class: "num", testid: "queue-oldest-" + q.queue });
  c.toggle = el("button", {
    type: "button", class: "small", testid: "pause-" + q.queue,
    onclick: (ev) => toggleQueue(tr._q, ev.currentTarget),
  });
  tr.append(c.name, el("td", {}, [c.state, " ", c.nohandler]), c.weight, c.limit, c.rate, ...COUNT_COLUMNS.map((col) => c[col]), c.oldest,
            el("td", { class: "actions" }, c.toggle));
  return tr;
}

function updateQueueRow(tr, q) {
  const c = tr._c;
  tr._q = q;
  tr.classList.toggle("paused", q.paused);
  setText(c.name, q.queue);
  setBadge(c.state, q.paused ? "paused" : "active");
  const stuck = q.without_handler || [];
  c.nohandler.hidden = stuck.length === 0;
  setText(c.nohandler, "no handler: " + fmtCount(stuck.reduce((n, w) => n + w.waiting, 0)));
  c.nohandler.title = "Waiting, and no live daemon can run them: " +
    stuck.map((w) => w.job_type + " (" + w.waiting + ")").join(", ");
  numCell(c.weight, q.weight);
  const limit = q.max_running;
  setText(c.limit, limit === null || limit === undefined ? "—" : fmtCount(limit));
  c.limit.classList.toggle("hot", typeof limit === "number" && q.running >= limit);
  setText(c.rate, q.rate || "—");  // worker.queue_rates, as written: 10/s
  for (const col of COUNT_COLUMNS) numCell(c[col], q[col], col === "dead");
  setText(c.oldest, q.oldest_due_age_s === null || q.oldest_due_age_s === undefined ? "—" : fmtDuration(q.oldest_due_age_s));
  setText(c.toggle, q.paused ? "Resume" : "Pause");
  c.toggle.className = "small " + (q.paused ? "primary" : "warn");
  c.toggle.setAttribute("aria-pressed", String(q.paused));
  c.toggle.title = (q.paused ? "Resume" : "Pause") + " queue " + q.queue + " on every worker";
}

export async function loadQueues() {
  const [data, types] = await Promise.all([
    api("GET", "v1/queues"), api("GET", "v1/job-types").catch(() => ({})),
  ]);
  const stuck = {};
  for (const w of types.without_handler || []) (stuck[w.queue] = stuck[w.queue] || []).push(w);
  overview.queues = (data.queues || []).map((q) => ({ ...q, without_handler: stuck[q.queue] || [] }));
  syncRows($("queues-body"), overview.queues, (q) => q.queue, buildQueueRow, updateQueueRow);
  $("queues-empty").hidden = overview.queues.length > 0;
  // Keep the job list's queue filter in step with the known queues.
  const select = $("filter-queue");
  const names = overview.queues.map((q) => q.queue);
  const current = Array.from(select.options).slice(1).map((o) => o.value);
  if (names.join("\n") !== current.join("\n")) {
    const chosen = select.value;
    while (select.options.length > 1) select.remove(1);
    for (const name of names) select.append(el("option", { value: name, text: name }));
    if (chosen && !names.includes(chosen)) select.append(el("option", { value: chosen, text: chosen }));
    select.value = chosen;
  }
}

function toggleQueue(q, button) {
  const verb = q.paused ? "resume" : "pause";
  return act(button, verb + " queue " + q.queue, async () => {
    const r = await api("POST", "v1/queues/" + enc(q.queue) + "/" + verb);
    return "Queue " + r.queue + (r.paused ? " paused" : " resumed") + (r.changed ? "" : " (it already was)");
  });
}
