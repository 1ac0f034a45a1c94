// The dashboard: tabs (the URL's #fragment names the open one), the 2-second refresh of what
// the open tab shows, and the wiring of the header.

import {
  $, ApiError, TOKEN_KEY, api, clearMessage, describe, fail, features, fmtCount, loadFeatures, onActionDone,
  serves, setText, showMessage, token,
} from "./core.js";
import { loadJobs, setupJobs, showStatus, wireJobs } from "./jobs.js";
import { KINDS, buildKindPanel, detail, kindAvailable, loadDetail, loadKind, wireDetail } from "./lists.js";
import {
  loadCounts, loadQueues, loadStatus, loadThroughput, overview, wireWorker,
} from "./overview.js";
import { loadFleet, loadOutbox, loadPeriodic, loadTenants } from "./panels.js";

const REFRESH_MS = 2000;
const AUTO_KEY = "gochatd.autoRefresh";
const TABS = ["overview", "fleet", "busy", "scheduled", "retries", "dead", "periodic", "tenants", "outbox", "jobs"];

// What each tab loads on every refresh (status, queues and counts load on every tab: the
// header and the tabs' counts come from them).
const LOADERS = {
  overview: () => [loadThroughput()],
  fleet: () => [loadFleet().then((d) => setTabCount("fleet", d.filter((x) => x.alive).length))],
  busy: () => [loadKind("busy")],
  scheduled: () => [loadKind("scheduled")],
  retries: () => [loadKind("retries")],
  dead: () => [loadKind("dead")],
  periodic: () => [loadPeriodic()],
  tenants: () => [loadTenants()],
  outbox: () => [loadOutbox()],
  jobs: () => [loadJobs()],
};

const state = { tab: "overview", timer: null, refreshing: false, refreshAgain: false, built: false };

// -- tabs --------------------------------------------------------------------------------------

function tabAvailable(tab) {
  if (tab === "fleet") return serves("/v1/fleet");
  if (tab === "periodic") return serves("/v1/periodic");
  if (tab in KINDS) return kindAvailable(tab);
  return true;
}

function tabFromHash() {
  const name = location.hash.replace(/^#/, "");
  return TABS.includes(name) && (!features.loaded || tabAvailable(name)) ? name : "overview";
}

function showTab(tab) {
  state.tab = tab;
  for (const name of TABS) {
    const button = $("tab-" + name);
    const on = name === tab;
    button.setAttribute("aria-selected", String(on));
    button.tabIndex = on ? 0 : -1;
    $("panel-" + name).hidden = !on;
  }
}

function setTabCount(tab, n) {
  const node = document.querySelector(`[data-testid="tab-count-${tab}"]`);
  if (!node) return;
  setText(node, typeof n === "number" ? fmtCount(n) : "");
  node.classList.toggle("hot", tab === "dead" && n > 0);
}

function updateTabCounts() {
  const c = overview.counts;
  const sum = (key) => overview.queues.reduce((n, q) => n + (q[key] || 0), 0);
  setTabCount("busy", c ? c.running : sum("running"));
  setTabCount("retries", c ? c.retrying : sum("retrying"));
  setTabCount("dead", c ? c.dead : sum("dead"));
  setTabCount("scheduled", c ? c.scheduled : undefined);
}

// Once the API's document is read: build the job tabs with the controls this daemon serves,
// show the tabs it can fill.
async function setup() {
  if (state.built) return;
  await loadFeatures();
  for (const kind of Object.keys(KINDS)) buildKindPanel(kind);
  for (const name of TABS) $("tab-" + name).hidden = !tabAvailable(name);
  setupJobs();
  state.built = true;
  showTab(tabFromHash());
}

// -- refresh loop ------------------------------------------------------------------------------

function schedule() {
  clearTimeout(state.timer);
  state.timer = null;
  if ($("auto-refresh").checked) state.timer = setTimeout(refresh, REFRESH_MS);
}

async function refreshOnce() {
  await setup();
  const results = await Promise.allSettled([
    loadStatus(),
    Promise.all([loadQueues(), loadCounts()]).then(updateTabCounts),
    ...LOADERS[state.tab](),
    detail.id !== null ? loadDetail(detail.id) : Promise.resolve(),
  ]);
  const failed = results.filter((r) => r.status === "rejected");
  if (failed.length) throw failed[0].reason;
}

export async function refresh() {
  if (state.refreshing) {
    state.refreshAgain = true;  // an action finished meanwhile: show its effect right after
    return;
  }
  state.refreshing = true;
  try {
    do {
      state.refreshAgain = false;
      try {
        await refreshOnce();
        clearMessage("refresh");
        setText($("last-refresh"), "updated " + new Date().toLocaleTimeString(undefined, { hour12: false }));
      } catch (err) {
        showMessage("error", "Refresh failed: " + describe(err), { key: "refresh" });
        setText($("last-refresh"), "refresh failed");
      }
    } while (state.refreshAgain);
  } finally {
    state.refreshing = false;
    schedule();
  }
}

// -- wiring ------------------------------------------------------------------------------------

function wireTabs() {
  for (const name of TABS) {
    $("tab-" + name).addEventListener("click", () => {
      if (location.hash !== "#" + name) location.hash = name;  // hashchange shows it
      else showTab(name);
    });
  }
  $("tabs").addEventListener("keydown", (ev) => {
    if (ev.key !== "ArrowRight" && ev.key !== "ArrowLeft") return;
    const visible = TABS.filter((t) => !$("tab-" + t).hidden);
    const at = visible.indexOf(state.tab);
    const next = visible[(at + (ev.key === "ArrowRight" ? 1 : visible.length - 1)) % visible.length];
    location.hash = next;
    $("tab-" + next).focus();
  });
  window.addEventListener("hashchange", () => {
    showTab(tabFromHash());
    refresh();
  });
  for (const link of document.querySelectorAll("#counts a[data-status]")) {
    link.addEventListener("click", () => showStatus(link.dataset.status));
  }
}

function wireHeader() {
  const tokenInput = $("token");
  tokenInput.value = token();
  $("token-form").addEventListener("submit", (ev) => { ev.preventDefault(); refresh(); });
  tokenInput.addEventListener("input", () => {
    try {
      const value = tokenInput.value.trim();
      if (value) localStorage.setItem(TOKEN_KEY, value);
      else localStorage.removeItem(TOKEN_KEY);
    } catch (err) {
      fail(err, "store the token");
    }
  });
  const auto = $("auto-refresh");
  try { auto.checked = localStorage.getItem(AUTO_KEY) !== "off"; } catch { auto.checked = true; }
  auto.addEventListener("change", () => {
    try { localStorage.setItem(AUTO_KEY, auto.checked ? "on" : "off"); } catch { /* private mode */ }
    if (auto.checked) refresh(); else schedule();
  });
  $("refresh-now").addEventListener("click", () => refresh());
  $("chart-by").addEventListener("change", () => refresh());
}

// Whether this daemon needs the token: GET v1/auth answers that (and only that) without one.
async function loadAuth() {
  let required;
  try {
    required = (await api("GET", "v1/auth")).token_required === true;
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) return;  // unknown: say nothing
    required = true;  // a daemon too old to serve v1/auth, with a token set
  }
  $("token-label").classList.toggle("required", required);
  setText($("token-need"), required ? "(required)" : "(not needed)");
  $("token").placeholder = required ? "admin token (required)" : "no admin.token set";
}

// The detail drawer opens below the header (its controls: refresh, token) and the tab bar
// (sticky under it), which both stay usable while a job is open.
function trackHeaderHeight() {
  const header = document.querySelector("header");
  const tabs = $("tabs");
  const set = () => {
    document.documentElement.style.setProperty("--header-h", header.offsetHeight + "px");
    document.documentElement.style.setProperty("--tabs-h", tabs.offsetHeight + "px");
  };
  const observer = new ResizeObserver(set);
  observer.observe(header);
  observer.observe(tabs);
  set();
}

function init() {
  trackHeaderHeight();
  showTab(tabFromHash());
  wireHeader();
  wireTabs();
  wireWorker();
  wireJobs();
  wireDetail();
  onActionDone(refresh);
  loadAuth();
  refresh();
}

init();
