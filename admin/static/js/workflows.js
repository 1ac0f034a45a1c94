// Dependent jobs and batches in the job drawer (docs/workflows.md): what a job waits for
// (each dependency opens that job), and its batch's progress with the callbacks. A job held
// on its dependencies is due 9999-12-31: it is shown as "waiting on dependencies", never as
// scheduled for that date.

import { $, api, el, enc, fail, fmtCount, fmtTime, serves, setBadge, setText } from "./core.js";
import { detail, selectJob } from "./lists.js";

export const WAITING = "waiting on dependencies";
// The dependencies listed in the drawer (a callback may wait on 1,000 members).
const SHOWN_DEPENDENCIES = 100;
const FINAL = ["completed", "dead", "cancelled"];
const STATUS_ORDER = ["completed", "dead", "cancelled", "running", "retrying", "queued"];

// Queued and due in the year 9999: held until its last dependency finishes.
export function isHeld(job) {
  if (job.status !== "queued" || !job.scheduled_at) return false;
  const t = new Date(job.scheduled_at);
  return !Number.isNaN(t.getTime()) && t.getUTCFullYear() >= 9999;
}

// When a waiting job runs, wherever the dashboard shows it.
export function runsAt(job) {
  return isHeld(job) ? WAITING : fmtTime(job.scheduled_at);
}

function jobButton(id, status, testid) {
  const badge = el("span", { class: "badge", testid: testid + "-status" });
  if (status) setBadge(badge, status); else setText(badge, "gone");
  return el("li", { testid }, [
    el("button", {
      type: "button", class: "small link mono", testid: testid + "-open", text: "#" + id,
      title: "Open job " + id,
      onclick: () => selectJob(id).catch((err) => fail(err, "load job " + id)),
    }), " ", badge]);
}

function dependencyItem(d) {
  const item = jobButton(d.job_id, d.status, "detail-dep-" + d.job_id);
  if (d.run_if_failed) item.append(el("span", { class: "note", text: " runs even if it fails" }));
  return item;
}

// The drawer's "Dependencies": how many are still open, then each with its status.
export function renderDependencies(job) {
  const deps = Array.isArray(job.depends_on) ? job.depends_on : [];
  $("detail-deps-block").hidden = deps.length === 0;
  if (!deps.length) return;
  const open = typeof job.waits_on === "number" ? job.waits_on : 0;
  const done = deps.filter((d) => FINAL.includes(d.status)).length;
  setText($("detail-waits-on"), (open > 0 ? "waiting on " + fmtCount(open) : "not waiting")
    + " · " + fmtCount(done) + " of " + fmtCount(deps.length) + " finished");
  const items = deps.slice(0, SHOWN_DEPENDENCIES).map(dependencyItem);
  if (deps.length > SHOWN_DEPENDENCIES) {
    items.push(el("li", { class: "note", text: "… and " + fmtCount(deps.length - SHOWN_DEPENDENCIES) + " more" }));
  }
  $("detail-deps").replaceChildren(...items);
}

function renderBatch(job, batch) {
  const kind = batch.callbacks.find((c) => c.job_id === job.id);
  setText($("detail-batch-title"), "Batch " + batch.id + (kind ? " (this job is its " + kind.on + ")" : ""));
  const bar = $("detail-batch-bar");
  bar.firstChild.style.width = (batch.size ? Math.min(100, (100 * batch.finished) / batch.size) : 100) + "%";
  bar.classList.toggle("failed", Boolean(batch.counts.dead || batch.counts.cancelled));
  setText($("detail-batch-progress"), fmtCount(batch.finished) + " / " + fmtCount(batch.size)
    + " finished" + (batch.done ? " (done)" : ""));
  const statuses = Object.keys(batch.counts).sort((a, b) => STATUS_ORDER.indexOf(a) - STATUS_ORDER.indexOf(b));
  $("detail-batch-counts").replaceChildren(...statuses.map((s) => {
    const badge = el("span", { class: "badge" });
    setBadge(badge, s);
    return el("li", { testid: "detail-batch-count-" + s }, [badge, " " + fmtCount(batch.counts[s])]);
  }));
  $("detail-batch-callbacks").replaceChildren(...batch.callbacks.map((c) => {
    const item = jobButton(c.job_id, c.status, "detail-callback-" + c.on.replace("_", "-"));
    item.prepend(el("span", { class: "mono", text: c.on + " " }));
    return item;
  }));
  $("detail-batch-block").hidden = false;
}

// The batch of a member (batch_id) or of a callback (callback_of), read on each refresh.
export async function loadBatch(job) {
  const id = job.batch_id ?? job.callback_of;
  if (id === null || id === undefined || !serves("/v1/batches/{batch_id}")) {
    $("detail-batch-block").hidden = true;
    return;
  }
  let batch;
  try {
    batch = await api("GET", "v1/batches/" + enc(id));
  } catch (err) {
    if (err.status !== 404) throw err;
    batch = null;  // pruned with its jobs meanwhile
  }
  if (detail.id !== job.id) return;
  if (batch) renderBatch(job, batch); else $("detail-batch-block").hidden = true;
}
