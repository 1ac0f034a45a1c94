// Per-minute throughput charts drawn as plain SVG (no library, nothing fetched).

import { el } from "./core.js";

export const SERIES = ["completed", "failed", "retried"];
// A time label every this many minutes: the first that leaves at most 8 on the axis.
const TICK_MINUTES = [1, 2, 5, 10, 15, 30];

function niceMax(value) {
  if (value <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * magnitude >= value) return step * magnitude;
  }
  return 10 * magnitude;
}

function hhmm(iso) {
  const d = new Date(iso);
  return String(d.getHours()).padStart(2, "0") + ":" + String(d.getMinutes()).padStart(2, "0");
}

function pathOf(points, key, x, y) {
  return points.map((p, i) => (i ? "L" : "M") + x(i).toFixed(1) + " " + y(p[key] || 0).toFixed(1)).join(" ");
}

export function totals(points) {
  const out = { completed: 0, failed: 0, retried: 0 };
  for (const p of points) for (const k of SERIES) out[k] += p[k] || 0;
  return out;
}

// The main chart: one line per outcome, the minute under the pointer named in a tooltip.
export function lineChart(points, { width = 1000, height = 210 } = {}) {
  const pad = { left: 42, right: 12, top: 10, bottom: 24 };
  const n = Math.max(points.length, 2);
  const top = niceMax(Math.max(0, ...points.flatMap((p) => SERIES.map((k) => p[k] || 0))));
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const x = (i) => pad.left + (i * innerW) / (n - 1);
  const y = (v) => pad.top + innerH - (v / top) * innerH;
  const svg = el("svg:svg", {
    class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", testid: "chart-svg",
    "data-minutes": points.length,
    "aria-label": `Jobs completed, failed and retried per minute over the last ${points.length} minutes`,
  });
  const grid = el("svg:g", { class: "grid axis" });
  for (const frac of [0, 0.25, 0.5, 0.75, 1]) {
    const v = top * frac;
    grid.append(el("svg:line", { x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }),
                el("svg:text", { x: pad.left - 6, y: y(v) + 4, "text-anchor": "end",
                                 text: Number.isInteger(v) ? v : v.toFixed(1) }));
  }
  const every = TICK_MINUTES.find((m) => points.length / m <= 8) || 60;
  points.forEach((p, i) => {
    if (new Date(p.minute).getMinutes() % every === 0) {
      // Labels at the ends stay inside the chart.
      const anchor = x(i) > width - pad.right - 20 ? "end" : x(i) < pad.left + 20 ? "start" : "middle";
      grid.append(el("svg:text", { x: x(i), y: height - 6, "text-anchor": anchor, text: hhmm(p.minute) }));
    }
  });
  svg.append(grid);
  if (points.length) {
    const area = pathOf(points, "completed", x, y) + ` L${x(points.length - 1)} ${y(0)} L${x(0)} ${y(0)} Z`;
    svg.append(el("svg:path", { class: "area s-completed", d: area }));
    // The last minute is the current one, still filling (daemons flush every 5 s): its
    // segment is dashed, so a minute just begun does not read as a fall to zero.
    const done = points.slice(0, -1);
    const current = points.slice(-2);
    for (const key of SERIES.slice().reverse()) {
      svg.append(el("svg:path", { class: "line s-" + key, d: pathOf(done, key, x, y), testid: "chart-line-" + key }));
      if (points.length > 1) {
        const d = pathOf(current, key, (i) => x(points.length - current.length + i), y);
        svg.append(el("svg:path", { class: "line partial s-" + key, d }));
      }
    }
  }
  const hover = el("svg:g", { class: "hover" });
  const step = innerW / (n - 1);
  points.forEach((p, i) => {
    hover.append(el("svg:rect", { x: x(i) - step / 2, y: pad.top, width: step, height: innerH },
      el("svg:title", { text: `${hhmm(p.minute)}${i === points.length - 1 ? " (so far)" : ""}: ${p.completed || 0} completed, ${p.failed || 0} failed, ${p.retried || 0} retried` })));
  });
  svg.append(hover);
  return svg;
}

// A small chart for one queue or job type: completed and failed, no axes.
export function sparkline(points, key) {
  const width = 300;
  const height = 36;
  const n = Math.max(points.length, 2);
  const top = niceMax(Math.max(0, ...points.flatMap((p) => [p.completed || 0, p.failed || 0])));
  const x = (i) => (i * width) / (n - 1);
  const y = (v) => height - 2 - (v / top) * (height - 4);
  return el("svg:svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", class: "chart",
                         role: "img", "aria-label": "per minute, last hour: " + key }, [
    el("svg:path", { class: "line s-completed", d: pathOf(points, "completed", x, y), "vector-effect": "non-scaling-stroke" }),
    el("svg:path", { class: "line s-failed", d: pathOf(points, "failed", x, y), "vector-effect": "non-scaling-stroke" }),
  ]);
}
