// The Fleet, Periodic, Tenants and Outbox tabs.

import {
  $, act, ago, api, el, enc, features, fmtCount, fmtTime, query, setBadge, setText, syncRows,
} from "./core.js";
import { selectJob } from "./lists.js";

// -- fleet -------------------------------------------------------------------------------------

const FLEET_ACTIONS = [["drain", "warn"], ["pause", "warn"], ["resume", "primary"]];

// A clean stop deletes the daemon's row: a row whose heartbeat expired is a daemon that died
// (kill -9, a crash, a lost host) and may still hold leases until the reaper takes them back.
function daemonState(d) {
  if (!d.alive) return "lost";
  if (d.draining) return "draining";
  if (d.paused) return "paused";
  return "active";
}

function buildDaemonRow(d) {
  const tr = el("tr", { testid: "fleet-row-" + d.id });
  const c = (tr._c = {});
  c.id = el("td", { class: "mono" });
  c.host = el("td", { class: "mono" });
  c.pid = el("td", { class: "num mono" });
  c.mode = el("td", { testid: "fleet-mode-" + d.id });
  c.state = el("span", { class: "badge", testid: "fleet-state-" + d.id });
  c.version = el("td");
  c.concurrency = el("td", { class: "num" });
  c.inFlight = el("td", { class: "num", testid: "fleet-in-flight-" + d.id });
  c.heartbeat = el("td", { testid: "fleet-heartbeat-" + d.id });
  c.buttons = {};
  const actions = el("td", { class: "actions" });
  for (const [verb, cls] of FLEET_ACTIONS) {
    c.buttons[verb] = el("button", {
      type: "button", class: "small " + cls, testid: "fleet-" + verb + "-" + d.id,
      text: verb[0].toUpperCase() + verb.slice(1),
      onclick: (ev) => fleetAction(tr._d, verb, ev.currentTarget),
    });
    actions.append(c.buttons[verb]);
  }
  tr.append(c.id, c.host, c.pid, c.mode, el("td", {}, c.state), c.version, c.concurrency, c.inFlight,
            c.heartbeat, actions);
  return tr;
}

// What a lost daemon held: its running rows (lease owner = its id), read from the database
// (its last heartbeat's in_flight is stale), each a button that opens the job.
function heldCell(td, d, held) {
  const jobs = held.get(d.id) || [];
  const key = jobs.map((j) => j.id).join(",");
  if (td.dataset.held === key && td.firstChild) return;
  td.dataset.held = key;
  td.replaceChildren(el("span", { testid: "fleet-held-" + d.id, text: fmtCount(jobs.length) + " held" }),
    ...jobs.map((j) => el("button", {
      type: "button", class: "small link", testid: "fleet-held-job-" + j.id, text: "#" + j.id,
      title: j.job_type + " (" + j.queue + "), running since " + fmtTime(j.locked_at),
      onclick: () => selectJob(j.id),
    })));
}

function updateDaemonRow(tr, d, held) {
  const c = tr._c;
  tr._d = d;
  tr.classList.toggle("lost", !d.alive);
  setText(c.id, d.id + (d.this ? " (this)" : ""));
  setText(c.host, d.host);
  setText(c.pid, d.pid);
  setText(c.mode, d.mode);
  setBadge(c.state, daemonState(d));
  setText(c.version, d.version);
  setText(c.concurrency, fmtCount(d.concurrency));
  if (d.alive) {
    delete c.inFlight.dataset.held;
    setText(c.inFlight, fmtCount(d.in_flight));
  } else {
    heldCell(c.inFlight, d, held);
  }
  setText(c.heartbeat, ago(d.last_heartbeat));
  c.buttons.drain.disabled = !d.alive || d.draining;
  c.buttons.pause.disabled = !d.alive || d.paused || d.draining;
  c.buttons.resume.disabled = !d.alive || !(d.paused || d.draining);
}

const HELD_LIMIT = 500;

// The running jobs by lease owner, read only when some daemon is lost.
async function heldJobs(daemons) {
  const held = new Map();
  if (daemons.every((d) => d.alive)) return held;
  const data = await api("GET", "v1/jobs" + query({ status: "running", limit: HELD_LIMIT }));
  for (const j of data.jobs || []) {
    if (!held.has(j.locked_by)) held.set(j.locked_by, []);
    held.get(j.locked_by).push(j);
  }
  return held;
}

export async function loadFleet() {
  const data = await api("GET", "v1/fleet");
  const daemons = data.daemons || [];
  const held = await heldJobs(daemons);
  syncRows($("fleet-body"), daemons, (d) => d.id, buildDaemonRow, (tr, d) => updateDaemonRow(tr, d, held));
  $("fleet-empty").hidden = daemons.length > 0;
  const alive = daemons.filter((d) => d.alive);
  const lost = daemons.length - alive.length;
  const busy = alive.reduce((n, d) => n + (d.in_flight || 0), 0);
  const slots = alive.reduce((n, d) => n + (d.concurrency || 0), 0);
  setText($("fleet-summary"), fmtCount(alive.length) + " alive of " + fmtCount(daemons.length)
    + (lost ? " · " + fmtCount(lost) + " lost (heartbeat expired without a clean stop)" : "")
    + " · " + fmtCount(busy) + " of " + fmtCount(slots) + " slots busy");
  return daemons;
}

function fleetAction(d, verb, button) {
  return act(button, verb + " daemon " + d.id, async () => {
    const r = await api("POST", "v1/fleet/" + enc(d.id) + "/" + verb);
    return "Asked daemon " + r.id + " to " + r.requested + " (it applies it within a few seconds)";
  });
}

// -- periodic ----------------------------------------------------------------------------------

function buildPeriodicRow(p) {
  const tr = el("tr", { testid: "periodic-row-" + p.job_type });
  tr._c = Array.from({ length: 8 }, (_, i) => el("td", { class: [0, 2].includes(i) ? "mono" : null }));
  tr._c[6].dataset.testid = "periodic-last-" + p.job_type;
  tr._c[7].dataset.testid = "periodic-next-" + p.job_type;
  tr.append(...tr._c);
  return tr;
}

function updatePeriodicRow(tr, p) {
  const [type, schedule, queue, tenant, catchUp, lastSlot, , next] = tr._c;
  setText(type, p.job_type);
  setText(schedule, p.schedule);
  setText(queue, p.queue);
  setText(tenant, p.tenant_id);
  setText(catchUp, p.catch_up);
  setText(lastSlot, p.last_slot ? fmtTime(p.last_slot) : "never");
  setText(next, p.next_runs.map((t) => fmtTime(t)).join("\n"));
  if (!tr._c[6].firstChild) tr._c[6].textContent = "—";
  next.style.whiteSpace = "pre-line";
}

// The last job a periodic entry enqueued: the newest of its type and tenant whose
// idempotency key is a slot's ("{job_type}:{slot}"), not one enqueued by hand.
async function lastJob(p, td) {
  const data = await api("GET", "v1/jobs" + query({ job_type: p.job_type, tenant: p.tenant_id, limit: 20, order: "newest" }));
  const job = (data.jobs || []).find((j) => String(j.idempotency_key || "").startsWith(p.job_type + ":"));
  if (!job) {
    td.replaceChildren("—");
    return;
  }
  const badge = el("span", { class: "badge" });
  setBadge(badge, job.status);
  td.replaceChildren(el("span", { class: "mono", text: "#" + job.id + " " }), badge,
                     " " + ago(job.completed_at || job.failed_at || job.updated_at));
}

export async function loadPeriodic() {
  const data = await api("GET", "v1/periodic" + query({ count: 3 }));
  const items = data.periodic || [];
  syncRows($("periodic-body"), items, (p) => p.job_type, buildPeriodicRow, updatePeriodicRow);
  $("periodic-empty").hidden = items.length > 0;
  setText($("periodic-summary"), "times by the " + data.clock + " clock; each slot is enqueued once across the fleet");
  // Only where the job list can answer newest first (else its first job is the oldest).
  if (!features.jobParams.has("order")) return;
  const rows = Array.from($("periodic-body").children);
  await Promise.all(items.map((p, i) => lastJob(p, rows[i]._c[6])));
}

// -- tenants -----------------------------------------------------------------------------------

function buildTenantRow(t) {
  const tr = el("tr", { testid: "tenant-row-" + t.tenant });
  const c = (tr._c = {});
  c.name = el("td", { class: "mono" });
  c.bar = el("span");
  c.running = el("span", { testid: "tenant-running-" + t.tenant });
  c.max = el("td", { class: "num", testid: "tenant-max-" + t.tenant });
  c.rate = el("td", { class: "num" });
  c.burst = el("td", { class: "num" });
  c.usage = el("span", { class: "usage" }, c.bar);
  tr.append(c.name, el("td", {}, [c.usage, c.running]), c.max, c.rate, c.burst);
  return tr;
}

function updateTenantRow(tr, t) {
  const c = tr._c;
  setText(c.name, t.tenant);
  setText(c.running, fmtCount(t.running));
  const limit = t.max_running;
  c.usage.hidden = !limit;
  if (limit) {
    c.bar.style.width = Math.min(100, (100 * t.running) / limit) + "%";
    c.usage.classList.toggle("full", t.running >= limit);
    c.usage.title = t.running + " of " + limit + " running";
  }
  setText(c.max, limit === null || limit === undefined ? "no limit" : fmtCount(limit));
  setText(c.rate, t.rate_per_s === null || t.rate_per_s === undefined ? "—" : t.rate_per_s);
  setText(c.burst, t.burst === null || t.burst === undefined ? "—" : t.burst);
}

export async function loadTenants() {
  const data = await api("GET", "v1/tenants");
  const tenants = data.tenants || [];
  syncRows($("tenants-body"), tenants, (t) => t.tenant, buildTenantRow, updateTenantRow);
  $("tenants-empty").hidden = tenants.length > 0;
}

// -- reply outbox ------------------------------------------------------------------------------

const OUTBOX_LIMIT = 100;

function buildOutboxRow(m) {
  const tr = el("tr", { testid: "outbox-row-" + m.id });
  const c = (tr._c = {});
  c.id = el("td", { class: "num mono" });
  c.status = el("span", { class: "badge", testid: "outbox-status-" + m.id });
  c.channel = el("td", { class: "mono" });
  c.tenant = el("td");
  c.job = el("td", { class: "num mono" });
  c.attempts = el("td", { class: "num" });
  c.next = el("td");
  c.errorClass = el("td", { class: "mono" });
  c.key = el("td", { class: "mono" });
  c.retry = el("button", {
    type: "button", class: "small primary", testid: "outbox-retry-" + m.id, text: "Retry",
    onclick: (ev) => retryOutbox(tr._m.id, ev.currentTarget),
  });
  tr.append(c.id, el("td", {}, c.status), c.channel, c.tenant, c.job, c.attempts, c.next,
            c.errorClass, c.key, el("td", { class: "actions" }, [c.retry]));
  return tr;
}

function updateOutboxRow(tr, m) {
  const c = tr._c;
  tr._m = m;
  setText(c.id, m.id);
  setBadge(c.status, m.status);
  setText(c.channel, m.channel);
  setText(c.tenant, m.tenant_id);
  setText(c.job, m.job_id === null ? "—" : m.job_id);
  setText(c.attempts, m.attempts);
  setText(c.next, m.status === "pending" ? fmtTime(m.next_attempt_at) : "—");
  setText(c.errorClass, m.error_class || "—");
  setText(c.key, m.dedupe_key);
  c.retry.disabled = m.status !== "dead";
  c.retry.title = c.retry.disabled ? "Only dead replies can be retried" : "Deliver reply " + m.id + " again";
}

export async function loadOutbox() {
  const lists = await Promise.all(["dead", "sending", "pending"].map(
    (status) => api("GET", "v1/outbox" + query({ status, limit: OUTBOX_LIMIT }))));
  const counts = lists.map((l) => (l.messages || []).length + (l.next_cursor ? "+" : ""));
  const rows = lists.flatMap((l) => l.messages || []).sort((a, b) => b.id - a.id);
  syncRows($("outbox-body"), rows, (m) => m.id, buildOutboxRow, updateOutboxRow);
  $("outbox-empty").hidden = rows.length > 0;
  setText($("outbox-summary"), counts[0] + " dead · " + counts[1] + " sending · " + counts[2] + " pending");
}

function retryOutbox(id, button) {
  return act(button, "retry reply " + id, async () => {
    const m = await api("POST", "v1/outbox/" + enc(id) + "/retry");
    return "Reply " + m.id + " is " + m.status + " again";
  });
}
