// cubenet studio's page: a view per address after '#': the runs table (#/), a run (#/run/NAME)
// and several runs compared (#/compare/A,B,...). Every figure is drawn here as SVG from the
// studio's JSON; nothing is loaded from elsewhere.
"use strict";

const view = document.getElementById("view");
const COLORS = ["#2f6fdf", "#e4572e", "#1f8a4c", "#8e44ad", "#b7791f", "#17a2b8", "#d63384", "#555"];
let leave = () => {};

// --- small helpers -------------------------------------------------------------------------

function el(tag, attributes = {}, ...children) {
  const svg = ["svg", "path", "line", "text", "g", "polyline"].includes(tag);
  const node = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "onclick") node.addEventListener("click", value);
    else if (key === "onchange") node.addEventListener("change", value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

async function getJson(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

const runPath = (name) => `/api/runs/${encodeURIComponent(name)}`;

function number(value, digits = 2) {
  return value === null || value === undefined ? "—" : value.toFixed(digits);
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "—";
}

function best(summary) {
  const b = summary.best_valid;
  if (!b) return "—";
  const value = b.metric === "Accuracy" ? `${b.value.toFixed(2)}%` : b.value.toFixed(4);
  return `${b.metric.toLowerCase()} ${value} (epoch ${b.epoch})`;
}

// --- line charts ---------------------------------------------------------------------------

// A chart of `series` ([{label, points: [[x, y]]}]) as an SVG figure titled `title`.
function chart(title, series, xLabel) {
  const width = 420, height = 220, left = 52, right = 12, top = 10, bottom = 34;
  const points = series.flatMap((s) => s.points);
  const figure = el("figure", { class: "chart", "data-metric": title }, el("figcaption", {}, title));
  if (points.length === 0) {
    figure.append(el("p", { class: "muted" }, "nothing logged yet"));
    return figure;
  }
  let [x0, x1] = [Math.min(...points.map((p) => p[0])), Math.max(...points.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...points.map((p) => p[1])), Math.max(...points.map((p) => p[1]))];
  if (x1 === x0) { x0 -= 0.5; x1 += 0.5; }
  if (y1 === y0) { y0 -= Math.abs(y0) * 0.05 + 1e-6; y1 += Math.abs(y1) * 0.05 + 1e-6; }
  const x = (v) => left + ((v - x0) / (x1 - x0)) * (width - left - right);
  const y = (v) => top + (1 - (v - y0) / (y1 - y0)) * (height - top - bottom);
  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img" });
  svg.append(el("line", { class: "axis", x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }));
  svg.append(el("line", { class: "axis", x1: left, x2: left, y1: top, y2: height - bottom }));
  for (let i = 0; i <= 4; i++) {
    const yv = y0 + ((y1 - y0) * i) / 4, xv = x0 + ((x1 - x0) * i) / 4;
    svg.append(el("text", { x: left - 6, y: y(yv) + 4, "text-anchor": "end" }, formatTick(yv)));
    svg.append(el("text", { x: x(xv), y: height - bottom + 15, "text-anchor": "middle" }, formatTick(xv)));
  }
  svg.append(el("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle" }, xLabel));
  series.forEach((s, i) => {
    const d = s.points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    svg.append(el("path", { class: "series", d, stroke: s.color || COLORS[i % COLORS.length], "data-series": s.label }));
  });
  figure.append(svg, el("div", { class: "legend" },
    series.map((s, i) => el("span", {}, legendMark(s.color || COLORS[i % COLORS.length]), s.label))));
  return figure;
}

function legendMark(color) {
  const mark = el("i");
  mark.style.background = color;
  return mark;
}

function formatTick(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 0.01 || a >= 1e5)) return v.toExponential(1);
  return a >= 100 ? v.toFixed(0) : a >= 1 ? v.toFixed(2) : v.toFixed(3);
}

// --- the runs table ------------------------------------------------------------------------

const COLUMNS = [
  ["name", "run", (r) => r.name],
  ["status", "status", (r) => r.status],
  ["data", "data", (r) => r.data],
  ["network", "network", (r) => r.network],
  ["epochs", "epochs", (r) => r.epochs_done],
  ["best", "best validation", (r) => (r.best_valid ? r.best_valid.value : null)],
  ["test", "test accuracy", (r) => r.test_accuracy],
  ["started", "started", (r) => r.started],
  ["duration", "duration", (r) => r.duration],
];
let sort = { key: "started", up: false };
const chosen = new Set();

async function showRuns() {
  view.replaceChildren(el("h1", {}, "Runs"), el("p", { class: "muted" }, "Loading…"));
  let timer;
  const draw = async () => {
    let runs;
    try { runs = await getJson("/api/runs"); } catch (error) { return fail(error); }
    const column = COLUMNS.find((c) => c[0] === sort.key);
    runs.sort((a, b) => {
      const [p, q] = [column[2](a), column[2](b)];
      const order = p === q ? 0 : p === null ? 1 : q === null ? -1 : p < q ? -1 : 1;
      return sort.up ? order : -order;
    });
    const compare = el("button", { id: "compare", disabled: chosen.size < 2 ? "" : null,
      onclick: () => { location.hash = `#/compare/${[...chosen].map(encodeURIComponent).join(",")}`; } },
      "Overlay the chosen runs");
    const head = el("tr", {}, el("th", {}, ""), COLUMNS.map(([key, label]) => el("th", {
      class: key === sort.key ? `sorted${sort.up ? " up" : ""}` : null, "data-key": key,
      onclick: () => { sort = { key, up: sort.key === key ? !sort.up : key === "name" }; draw(); },
    }, label)));
    const rows = runs.map((r) => el("tr", { "data-run": r.name },
      el("td", {}, el("input", { type: "checkbox", checked: chosen.has(r.name) ? "" : null,
        onchange: (e) => { e.target.checked ? chosen.add(r.name) : chosen.delete(r.name); draw(); } })),
      el("td", {}, el("a", { href: `#/run/${encodeURIComponent(r.name)}` }, r.name)),
      el("td", {}, el("span", { class: `status ${r.status}` }, r.status)),
      el("td", {}, r.data), el("td", {}, r.network),
      el("td", { class: "number" }, r.epochs ? `${r.epochs_done} / ${r.epochs}` : r.epochs_done),
      el("td", {}, best(r)),
      el("td", { class: "number" }, r.test_accuracy === null ? "—" : `${r.test_accuracy.toFixed(2)}%`),
      el("td", {}, when(r.started)), el("td", { class: "number" }, duration(r.duration))));
    view.replaceChildren(el("h1", {}, "Runs"),
      el("div", { class: "toolbar" }, compare, el("span", { class: "muted" }, `${runs.length} runs`)),
      runs.length ? el("table", { id: "runs" }, el("thead", {}, head), el("tbody", {}, rows))
        : el("p", { class: "muted" }, "No runs in this folder yet: `cubenet train --artifact-dir` one here."));
  };
  await draw();
  timer = setInterval(draw, 3000);
  leave = () => clearInterval(timer);
}

// --- a run ---------------------------------------------------------------------------------

// The page at once, then again at each of the run's events.
function showRun(name) {
  view.replaceChildren(el("h1", {}, name), el("p", { class: "muted" }, "Loading…"));
  getJson(runPath(name)).then((run) => drawRun(name, run), fail);
  const events = new EventSource(`${runPath(name)}/events`);
  events.addEventListener("run", (event) => drawRun(name, JSON.parse(event.data)));
  events.onerror = () => { if (events.readyState === EventSource.CLOSED) fail(new Error("the run is gone")); };
  leave = () => events.close();
}

function drawRun(name, run) {
  const s = run.summary;
  const total = s.epochs || Math.max(run.progress.epochs, 1);
  const bar = el("div", {});
  bar.style.width = `${Math.min(100, (100 * run.progress.epochs) / total).toFixed(1)}%`;
  const stop = s.status === "running" ? el("button", { id: "stop", onclick: () => stopRun(name) }, "Stop") : null;
  const fact = (label, value, id) => el("div", { id }, el("span", {}, label), value);
  const charts = Object.entries(run.curves).map(([metric, curves]) =>
    chart(metric, Object.entries(curves.epochs).map(([split, points], i) => ({ label: split, points, color: COLORS[i] })), "epoch"));
  if (run.curves.Loss && run.curves.Loss.iterations.length) {
    charts.splice(1, 0, chart("Loss per iteration", [{ label: "train", points: run.curves.Loss.iterations }], "epoch"));
  }
  const file = (f) => `${runPath(name)}/files/${f}`;
  const results = run.per_class.length ? [el("h2", {}, "Results on the test split"),
    el("table", { id: "per-class" }, el("thead", {}, el("tr", {}, el("th", {}, "class"), el("th", {}, "images"), el("th", {}, "accuracy"))),
      el("tbody", {}, run.per_class.map((c) => el("tr", {}, el("td", {}, c.class), el("td", { class: "number" }, c.images),
        el("td", { class: "number" }, c.accuracy === null ? "—" : `${(100 * c.accuracy).toFixed(2)}%`))))),
    el("h2", {}, "Confusion matrix"), el("img", { class: "figure", src: file("confusion-matrix.png"), alt: "confusion matrix of the test split" })] : [];
  view.replaceChildren(
    el("h1", {}, name, " ", el("span", { class: `status ${s.status}`, id: "status" }, s.status)),
    el("div", { class: "facts" },
      fact("data", s.data), fact("network", s.network),
      fact("epochs", `${run.progress.epochs.toFixed(2)} / ${s.epochs ?? "?"}`, "epochs"),
      fact("best validation", best(s)),
      fact("test accuracy", s.test_accuracy === null ? "—" : `${s.test_accuracy.toFixed(2)}%`, "test-accuracy"),
      fact("images/s", run.progress.images_per_second ? Math.round(run.progress.images_per_second).toLocaleString() : "—"),
      fact("time left", duration(run.progress.eta)), fact("duration", duration(s.duration)), stop),
    el("div", { class: "bar" }, bar),
    el("div", { class: "charts" }, charts),
    ...results,
    el("h2", {}, "Run file"),
    el("div", { class: "toolbar" }, el("a", { href: file("run.toml"), download: `${name}.toml` }, "Download run.toml"),
      el("a", { href: file("config.json"), download: `${name}-config.json` }, "config.json")),
    el("pre", { id: "run-file" }, run.run_file ?? "no run file"),
    el("h2", {}, "Log"), el("pre", { id: "log" }, run.log_tail.join("\n") || "nothing logged yet"));
}

async function stopRun(name) {
  const button = document.getElementById("stop");
  button.disabled = true;
  const response = await fetch(`${runPath(name)}/stop`, { method: "POST", credentials: "same-origin" });
  button.textContent = response.ok ? "Stopping…" : await response.text();
}

// --- several runs --------------------------------------------------------------------------

async function showCompare(names) {
  view.replaceChildren(el("h1", {}, "Compare"), el("p", { class: "muted" }, "Loading…"));
  let runs;
  try { runs = await Promise.all(names.map((n) => getJson(runPath(n)))); } catch (error) { return fail(error); }
  const metrics = [...new Set(runs.flatMap((r) => Object.keys(r.curves)))];
  const charts = metrics.flatMap((metric) => ["valid", "train"].map((split) => chart(`${metric} (${split})`,
    runs.map((r, i) => ({ label: r.summary.name, color: COLORS[i % COLORS.length],
      points: (r.curves[metric] && r.curves[metric].epochs[split]) || [] })), "epoch")));
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.settings)))].sort();
  const rows = keys.map((key) => {
    const values = runs.map((r) => r.settings[key] ?? "—");
    return el("tr", { class: new Set(values).size > 1 ? "differs" : null }, el("td", {}, key), values.map((v) => el("td", {}, v)));
  });
  view.replaceChildren(el("h1", {}, `Compare ${runs.length} runs`),
    el("div", { class: "charts" }, charts.filter((c) => c.querySelector("svg"))),
    el("h2", {}, "Settings"),
    el("table", { id: "settings" }, el("thead", {}, el("tr", {}, el("th", {}, "setting"), runs.map((r) => el("th", {}, r.summary.name)))),
      el("tbody", {}, rows)));
}

// --- routing -------------------------------------------------------------------------------

function fail(error) {
  view.replaceChildren(el("h1", {}, "Something went wrong"), el("p", { class: "error" }, error.message));
}

function route() {
  leave();
  leave = () => {};
  const [, page, argument] = location.hash.split("/");
  if (page === "run" && argument) showRun(decodeURIComponent(argument));
  else if (page === "compare" && argument) showCompare(argument.split(",").map(decodeURIComponent));
  else showRuns();
}

window.addEventListener("hashchange", route);
route();
