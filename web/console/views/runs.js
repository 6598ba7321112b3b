// Runs: the caller's runs (newest first, or only the active ones) and one run's timeline,
// live while it runs (its event stream) and replayable after (its stored events, with a
// replay position to step through them).

import { api, followRun } from "../api.js";
import { h, fill, when, duration, alertBox } from "../dom.js";
import { TimelineModel, drawTimeline, eventTable } from "./timeline.js";

export async function render(main, params) {
  const abort = new AbortController();
  const runId = params[0] ?? null;
  const activeOnly = h("input", { type: "checkbox", id: "active-only" });
  const list = h("ul", { class: "run-list", "aria-label": "Runs" });
  const detail = h("section", { class: "run-detail", "aria-label": "Run" });
  fill(
    main,
    h("h1", {}, "Runs"),
    h(
      "div",
      { class: "split" },
      h("div", {}, h("div", { class: "toolbar" }, h("label", {}, activeOnly, " Only active runs")), list),
      detail,
    ),
  );
  const loadList = async () => {
    try {
      const answer = await api("/runs", { query: { limit: 100, status: activeOnly.checked ? "active" : "" }, signal: abort.signal });
      fill(
        list,
        answer.data.length ? null : h("li", { class: "note" }, activeOnly.checked ? "No run is active." : "No runs yet."),
        answer.data.map((r) =>
          h(
            "li",
            {},
            h(
              "a",
              { href: `#/runs/${encodeURIComponent(r.run_id)}`, "aria-current": r.run_id === runId ? "true" : null },
              h("span", { class: `badge ${r.status}` }, r.status),
              " ",
              h("code", {}, r.run_id.slice(0, 8)),
              " ",
              h("small", {}, `${when(r.created_at)}${r.finished_at && r.started_at ? " · " + duration(r.finished_at - r.started_at) : ""}`),
            ),
          ),
        ),
      );
    } catch (e) {
      if (e.name !== "AbortError") fill(list, h("li", {}, alertBox(e.message)));
    }
  };
  activeOnly.addEventListener("change", loadList);
  loadList();
  // The list again once the picked run ends (its status there changes).
  if (runId) showRun(detail, runId, abort.signal).then(loadList);
  else detail.append(h("p", { class: "empty" }, "Pick a run to see its timeline."));
  return () => abort.abort();
}

async function showRun(detail, runId, signal) {
  const model = new TimelineModel();
  const head = h("div", { class: "run-meta" });
  const chart = h("div", { class: "timeline", "aria-live": "off" });
  const tableHolder = h("div");
  const position = h("input", { type: "range", id: "replay", min: "0", max: "1000", value: "1000", "aria-describedby": "replay-help" });
  const play = h("button", { type: "button", id: "replay-play" }, "Replay");
  const positionLabel = h("output", { for: "replay", id: "replay-at" });
  fill(
    detail,
    h("h2", {}, "Run ", h("code", {}, runId)),
    head,
    h(
      "div",
      { class: "legend", "aria-hidden": "true" },
      h("span", { class: "llm" }, "LLM round"),
      h("span", { class: "tool" }, "tool call"),
      h("span", { class: "sub" }, "sub-agent"),
      h("span", { class: "harness" }, "harness gate"),
      h("span", { class: "rejected" }, "rejection / correction"),
    ),
    chart,
    h(
      "div",
      { class: "toolbar replay" },
      h("label", { for: "replay" }, "Replay position "),
      position,
      positionLabel,
      play,
      h("span", { id: "replay-help", class: "sr-only" }, "Moves through the run's events in time; later events are dimmed."),
    ),
    h("h2", {}, "Events"),
    tableHolder,
  );
  let live = true;
  let cursor = null;
  let drawQueued = false;
  const drawNow = () => {
    drawQueued = false;
    const width = Math.max(600, chart.clientWidth || detail.clientWidth || 800);
    fill(chart, drawTimeline(model, { width, cursor }));
    fill(
      head,
      h("span", { class: `badge ${model.status}`, id: "run-status" }, model.status),
      model.t0 ? h("span", {}, `${when(model.t0)} · ${duration((model.tEnd ?? Date.now()) - model.t0)}${live ? " so far" : ""}`) : null,
    );
    fill(tableHolder, eventTable(model));
  };
  // Events come in bursts: one drawing per frame.
  const draw = () => {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => drawQueued && drawNow());
  };
  position.addEventListener("input", () => {
    const span = (model.tEnd ?? Date.now()) - (model.t0 ?? Date.now());
    cursor = Number(position.value) >= 1000 ? null : (span * Number(position.value)) / 1000;
    positionLabel.textContent = cursor === null ? "end" : "+" + duration(cursor);
    draw();
  });
  play.addEventListener("click", () => {
    const span = (model.tEnd ?? Date.now()) - (model.t0 ?? Date.now());
    const started = performance.now();
    const length = Math.min(8000, Math.max(2000, span)); // replayed over 2-8 s
    const tick = () => {
      const f = Math.min(1, (performance.now() - started) / length);
      position.value = String(Math.round(f * 1000));
      position.dispatchEvent(new Event("input"));
      if (f < 1 && !signal.aborted) requestAnimationFrame(tick);
    };
    tick();
  });
  const loadSteps = async () => {
    try {
      const steps = await api(`/runs/${encodeURIComponent(runId)}/steps`, { signal });
      model.steps(steps.data);
      draw();
    } catch {
      // The steps add round timings; the events alone still draw the timeline.
    }
  };
  // While the run is live: its steps every second (they carry the LLM rounds' timings),
  // and the chart redrawn so open bars grow.
  const ticker = setInterval(() => {
    if (!live || signal.aborted) return clearInterval(ticker);
    loadSteps();
  }, 1000);
  draw();
  try {
    await followRun(
      runId,
      (e) => {
        model.event(e);
        draw();
      },
      { signal },
    );
    live = false;
    clearInterval(ticker);
    // Left (another page or run took its place): followRun returns, but the run did not
    // end, so this view must not say it did.
    if (signal.aborted) return;
    await loadSteps();
    drawNow();
    detail.dataset.complete = "true";
  } catch (e) {
    live = false;
    clearInterval(ticker);
    if (e.name !== "AbortError") detail.append(alertBox(e.status === 404 ? "No such run." : e.message));
  }
}
