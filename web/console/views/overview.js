// Overview: small charts of what /metrics says, sampled every 2 s while the page is open —
// live runs, runs finished per second, run latency percentiles (p50, p90, p99 of the runs
// that ended in the last 30 s), open streams, HTTP requests per second — and the caller's
// active runs.

import { api } from "../api.js";
import { h, svg, fill, duration, when, alertBox } from "../dom.js";
import { parseMetrics, total, buckets, bucketDelta, quantile } from "../metrics.js";

const INTERVAL = 2000;
const KEEP = 90; // 3 minutes of samples
const LATENCY_WINDOW = 15; // samples: 30 s

export async function render(main) {
  const samples = [];
  const tiles = {
    active: tile("live-runs", "Live runs", "runs submitted and not ended"),
    rate: tile("runs-rate", "Runs per second", "runs that ended, per second"),
    latency: tile("run-latency", "Run latency", "p50 · p90 · p99 of the runs that ended in the last 30 s"),
    streams: tile("open-streams", "Open streams", "SSE responses open now"),
    http: tile("http-rate", "HTTP requests per second", "all routes"),
  };
  const errorBox = h("div");
  const activeList = h("div", { class: "table-wrap" });
  fill(
    main,
    h("h1", {}, "Overview"),
    errorBox,
    h("div", { class: "tiles" }, Object.values(tiles).map((t) => t.el)),
    h("h2", {}, "Your active runs"),
    activeList,
    h("p", { class: "hint" }, "Read from /metrics every 2 seconds while this page is open (troupe_runs_active, troupe_runs_finished_total, troupe_run_duration_seconds, troupe_http_open_streams, troupe_http_requests_total)."),
  );

  const sample = async () => {
    try {
      const text = await api("/metrics");
      const series = parseMetrics(text);
      samples.push({
        t: Date.now(),
        active: total(series, "troupe_runs_active") ?? 0,
        finished: total(series, "troupe_runs_finished_total") ?? 0,
        runBuckets: buckets(series, "troupe_run_duration_seconds"),
        streams: total(series, "troupe_http_open_streams") ?? 0,
        requests: total(series, "troupe_http_requests_total") ?? 0,
      });
      if (samples.length > KEEP) samples.shift();
      fill(errorBox);
      draw();
    } catch (e) {
      fill(errorBox, alertBox(`Cannot read /metrics: ${e.message}`));
    }
    try {
      const active = await api("/runs", { query: { status: "active", limit: 50 } });
      fill(
        activeList,
        active.data.length
          ? h(
              "table",
              { id: "active-runs" },
              h("thead", {}, h("tr", {}, ["run", "status", "since"].map((c) => h("th", { scope: "col" }, c)))),
              h(
                "tbody",
                {},
                active.data.map((r) =>
                  h(
                    "tr",
                    {},
                    h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, h("code", {}, r.run_id.slice(0, 8)))),
                    h("td", {}, h("span", { class: `badge ${r.status}` }, r.status)),
                    h("td", {}, when(r.created_at)),
                  ),
                ),
              ),
            )
          : h("p", { class: "note" }, "None."),
      );
    } catch {
      // A token without the user role cannot list runs; the charts still work.
    }
  };

  const rates = (key) =>
    samples.slice(1).map((s, i) => {
      const prev = samples[i];
      return Math.max(0, (s[key] - prev[key]) / ((s.t - prev.t) / 1000));
    });

  const draw = () => {
    const last = samples[samples.length - 1];
    tiles.active.show(String(last.active), [samples.map((s) => s.active)]);
    const runRates = rates("finished");
    tiles.rate.show(runRates.length ? runRates[runRates.length - 1].toFixed(2) : "…", [runRates]);
    const httpRates = rates("requests");
    tiles.http.show(httpRates.length ? httpRates[httpRates.length - 1].toFixed(1) : "…", [httpRates]);
    tiles.streams.show(String(last.streams), [samples.map((s) => s.streams)]);
    // Latency percentiles over a sliding window, one point per sample.
    const p = { 50: [], 90: [], 99: [] };
    for (let i = 0; i < samples.length; i++) {
      const from = samples[Math.max(0, i - LATENCY_WINDOW)];
      const window = i === 0 ? samples[0].runBuckets : bucketDelta(samples[i].runBuckets, from.runBuckets);
      for (const q of [50, 90, 99]) p[q].push(quantile(q / 100, window));
    }
    const fmt = (v) => (v === null || v === undefined ? "–" : duration(v * 1000));
    // No run ended in the window: the figures since the node started, said so.
    const recent = p[50][p[50].length - 1] !== null;
    const at = (q) => (recent ? p[q][p[q].length - 1] : quantile(q / 100, last.runBuckets));
    tiles.latency.show(`${fmt(at(50))} · ${fmt(at(90))} · ${fmt(at(99))}`, [p[50], p[90], p[99]], ["p50", "p90", "p99"]);
    tiles.latency.note(recent ? "p50 · p90 · p99 of the runs that ended in the last 30 s" : "p50 · p90 · p99 since start (no run ended in the last 30 s)");
  };

  await sample();
  const timer = setInterval(sample, INTERVAL);
  return () => clearInterval(timer);
}

function tile(id, title, help) {
  const value = h("div", { class: "value", id: `${id}-value` }, "…");
  const chart = h("div", { "aria-hidden": "true" });
  const hint = h("small", { class: "hint" }, help);
  const el = h("section", { class: "card tile", id, "aria-labelledby": `${id}-title` }, h("h2", { id: `${id}-title` }, title), value, chart, hint);
  return {
    el,
    note(text) {
      hint.textContent = text;
    },
    show(text, lines, classes = []) {
      value.textContent = text;
      fill(chart, sparkline(lines, classes));
    },
  };
}

/// Lines of values (null: no value) scaled together into a 200x56 SVG.
function sparkline(lines, classes) {
  const W = 200;
  const H = 56;
  const all = lines.flat().filter((v) => v !== null && Number.isFinite(v));
  const max = Math.max(1e-9, ...all);
  const n = Math.max(2, ...lines.map((l) => l.length));
  return svg(
    "svg",
    { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none" },
    lines.map((line, k) => {
      const points = line
        .map((v, i) => (v === null || !Number.isFinite(v) ? null : `${((i + n - line.length) / (n - 1)) * W},${H - 3 - (v / max) * (H - 6)}`))
        .filter(Boolean)
        .join(" ");
      return svg("polyline", { points, class: classes[k] ?? "" });
    }),
  );
}
