// The dashboard's plumbing: DOM helpers (text only, never HTML from data), formatting, the
// message area, the API client with the bearer token, keyed table rows, feature detection.

export const $ = (id) => document.getElementById(id);
export const enc = encodeURIComponent;
export const TOKEN_KEY = "gochatd.adminToken";

export function el(tag, props = {}, children = []) {
  const svg = tag.startsWith("svg:");
  const node = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.setAttribute("class", value);
    else if (key === "testid") node.dataset.testid = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of [].concat(children)) {
    if (child !== null && child !== undefined) node.append(child);  // strings become text nodes
  }
  return node;
}

export function setText(node, text) {
  const value = String(text);
  if (node.textContent !== value) node.textContent = value;
}

export function setBadge(node, status) {
  const safe = /^[a-z_]+$/.test(String(status)) ? String(status) : "unknown";
  node.className = "badge st-" + safe;
  setText(node, status);
}

export function fmtCount(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "—";
}

export function fmtDuration(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + "m " + String(s % 60).padStart(2, "0") + "s";
  const h = Math.floor(m / 60);
  if (h < 48) return h + "h " + String(m % 60).padStart(2, "0") + "m";
  return Math.floor(h / 24) + "d " + String(h % 24).padStart(2, "0") + "h";
}

export function secondsSince(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? NaN : (Date.now() - t) / 1000;
}

export function ago(iso) {
  if (!iso) return "—";
  const delta = secondsSince(iso);
  if (Number.isNaN(delta)) return String(iso);
  if (delta < -1) return "in " + fmtDuration(-delta);
  return fmtDuration(Math.max(0, delta)) + " ago";
}

export function fmtTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { hour12: false }) + " (" + ago(iso) + ")";
}

export function firstLine(text) {
  if (!text) return "";
  const line = String(text).split("\n", 1)[0];
  return line.length > 160 ? line.slice(0, 157) + "…" : line;
}

// -- messages --------------------------------------------------------------------------------

const messages = new Map();  // key -> element
let messageSeq = 0;

export function showMessage(kind, text, { key, timeoutMs } = {}) {
  const id = key || "m" + (++messageSeq);
  let box = messages.get(id);
  if (!box) {
    box = el("div", { class: "msg " + kind, testid: "message-" + kind, role: kind === "error" ? "alert" : null });
    box._text = el("span", { class: "text" });
    box.append(box._text, el("button", {
      type: "button", title: "Dismiss", "aria-label": "Dismiss", text: "×",
      onclick: () => clearMessage(id),
    }));
    messages.set(id, box);
    $("messages").append(box);
  }
  box.className = "msg " + kind;
  box.dataset.testid = "message-" + kind;
  setText(box._text, text);
  clearTimeout(box._timer);
  if (timeoutMs) box._timer = setTimeout(() => clearMessage(id), timeoutMs);
  while (messages.size > 6) clearMessage(messages.keys().next().value);
}

export function clearMessage(key) {
  const box = messages.get(key);
  if (box) {
    clearTimeout(box._timer);
    box.remove();
    messages.delete(key);
  }
}

export const info = (text) => showMessage("info", text, { timeoutMs: 5000 });
export const fail = (err, what) => showMessage("error", (what ? what + ": " : "") + describe(err));

// -- the API ---------------------------------------------------------------------------------

export class ApiError extends Error {
  constructor(method, path, status, code, message) {
    super(message);
    Object.assign(this, { method, path, status, code });
  }
}

export function describe(err) {
  if (err instanceof ApiError) {
    const where = err.method + " /" + err.path;
    if (err.status === 0) return where + ": " + err.message;
    let text = where + " → " + err.status + " " + err.code + ": " + err.message;
    if (err.status === 401) text += " (enter the admin token in the header)";
    return text;
  }
  return String(err && err.message ? err.message : err);
}

export function token() {
  try { return localStorage.getItem(TOKEN_KEY) || ""; } catch { return ""; }
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const init = { method, headers, cache: "no-store", credentials: "same-origin" };
  const t = token().trim();
  if (t) headers.Authorization = "Bearer " + t;
  if (method !== "GET" && body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);  // relative: works behind a path prefix too
  } catch (exc) {
    throw new ApiError(method, path, 0, "network", "the daemon did not answer (" + exc.message + ")");
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!response.ok) {
    const e = (data && data.error) || {};
    throw new ApiError(method, path, response.status, e.code || "http_" + response.status,
                       e.message || response.statusText || "request failed");
  }
  return data;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? "?" + s : "";
}

// -- what this daemon serves -----------------------------------------------------------------
// The admin API documents every route it serves in /v1/openapi.json (a test checks the two
// match): a tab or control whose route is not there stays hidden.

export const features = { loaded: false, paths: new Set(), ops: new Set(), jobParams: new Set() };

export async function loadFeatures() {
  const doc = await api("GET", "v1/openapi.json");
  const paths = (doc && doc.paths) || {};
  features.paths = new Set(Object.keys(paths));
  features.ops = new Set(Object.entries(paths).flatMap(([p, item]) => Object.keys(item).map((m) => m + " " + p)));
  const list = (paths["/v1/jobs"] && paths["/v1/jobs"].get) || {};
  features.jobParams = new Set((list.parameters || []).map((p) => p.name));
  features.loaded = true;
}

export const serves = (path, method = "get") => features.ops.has(method + " " + path);

// -- keyed table rows: updated in place so clicks, focus and checkboxes survive a refresh ----

export function syncRows(tbody, items, key, build, update) {
  const existing = new Map();
  for (const tr of Array.from(tbody.children)) existing.set(tr.dataset.key, tr);
  const seen = new Set();
  let previous = null;
  for (const item of items) {
    const k = String(key(item));
    let tr = existing.get(k);
    if (!tr) {
      tr = build(item);
      tr.dataset.key = k;
    }
    update(tr, item);
    seen.add(k);
    const wanted = previous ? previous.nextSibling : tbody.firstChild;
    if (tr !== wanted) tbody.insertBefore(tr, wanted);
    previous = tr;
  }
  for (const [k, tr] of existing) if (!seen.has(k)) tr.remove();
}

export function numCell(td, n, hot) {
  setText(td, fmtCount(n));
  td.classList.toggle("zero", n === 0);
  td.classList.toggle("hot", Boolean(hot) && n > 0);
}

// -- actions ---------------------------------------------------------------------------------

let afterAction = () => Promise.resolve();

export function onActionDone(fn) { afterAction = fn; }

// Runs an operator action with its button disabled, reports the outcome, then refreshes.
export async function act(button, what, fn) {
  if (button) button.disabled = true;
  try {
    const message = await fn();
    if (message) info(message);
  } catch (err) {
    fail(err, what);
  } finally {
    if (button) button.disabled = false;
    await afterAction();
  }
}
