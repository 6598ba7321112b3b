// A run's timeline: LLM rounds, tool calls (parallel ones on rows of their own), the
// harness's gates and decisions, corrections, and sub-agents as nested lanes under the
// call that started them, on one time axis. Built from the run's events (live or
// replayed) and its stored steps (an LLM round's start and duration are in its step).

import { h, svg, duration } from "../dom.js";

/// The timeline's model, fed event by event and with the steps when they arrive.
export class TimelineModel {
  constructor() {
    this.t0 = null;
    this.tEnd = null;
    this.status = "queued";
    this.rounds = new Map(); // round -> {round, start, end, status, kind, model}
    this.tools = new Map(); // call id -> {callId, tool, start, end, status, args, output, ms}
    this.decisions = []; // {t, name, allowed, codes, messages}
    this.corrections = []; // {t, codes}
    this.notes = []; // {t, text}
    this.events = []; // every event, for the table
    this.deltaRounds = new Map(); // round -> {first, last} delta times
  }

  event(e) {
    this.events.push(e);
    const data = e.data;
    if (e.event === "done") {
      this.status = data?.status ?? this.status;
      return;
    }
    if (!data || typeof data !== "object" || !data.type) return;
    const t = data.created_at;
    const d = data.data ?? {};
    const type = data.type;
    if (this.t0 === null || t < this.t0) this.t0 = t;
    if (type === "run.started") {
      this.status = "running";
    } else if (type === "run.completed" || type === "run.failed" || type === "run.cancelled") {
      this.tEnd = t;
      this.status = { "run.completed": "succeeded", "run.failed": "failed", "run.cancelled": "cancelled" }[type];
    } else if (type === "model.delta") {
      const r = this.deltaRounds.get(d.round) ?? { first: t, last: t };
      r.last = t;
      this.deltaRounds.set(d.round, r);
    } else if (type === "model.correction") {
      this.corrections.push({ t, codes: d.violation_codes ?? [] });
    } else if (type === "action.started") {
      this.tools.set(d.call_id, { callId: d.call_id, tool: d.tool, start: t, end: null, status: "running", args: d.arguments, output: null, ms: null });
    } else if (type === "action.finished") {
      const call = this.tools.get(d.call_id) ?? { callId: d.call_id, tool: d.tool, start: t - (d.duration_ms ?? 0), args: "" };
      call.end = call.start + (d.duration_ms ?? t - call.start);
      call.status = d.status;
      call.output = d.output;
      call.ms = d.duration_ms;
      this.tools.set(d.call_id, call);
    } else if (type.startsWith("harness.")) {
      const decision = d.decision ?? d;
      this.decisions.push({
        t,
        name: type.slice(8),
        allowed: decision.allowed !== false && d.sent !== false,
        codes: decision.violation_codes ?? [],
        messages: (decision.violations ?? []).map((v) => v.message).filter(Boolean),
      });
    } else if (type === "context.compressed") {
      this.notes.push({ t, text: `context compressed (${d.tokens_before} → ${d.tokens_after} tokens)` });
    }
  }

  /// The run's stored steps: LLM rounds (start and duration) and full tool arguments.
  steps(list) {
    for (const s of list) {
      if (s.kind === "llm" && s.name === "llm_round" && s.output?.started_at) {
        const o = s.output;
        const round = o.round ?? this.rounds.size + 1;
        this.rounds.set(round, {
          round,
          start: o.started_at,
          end: o.started_at + (o.duration_ms ?? 0),
          status: s.status,
          kind: o.kind ?? o.failure ?? "",
          model: o.model ?? "",
          toolCalls: (o.tool_calls ?? []).length,
        });
        if (this.t0 === null || o.started_at < this.t0) this.t0 = o.started_at;
      } else if (s.kind === "tool" && s.input?.call_id) {
        const call = this.tools.get(s.input.call_id);
        if (call && typeof s.input.arguments === "string") call.args = s.input.arguments;
      }
    }
  }

  /// The sub-agent calls with their tasks (from their arguments), for nested lanes.
  subAgents() {
    const out = [];
    for (const call of this.tools.values()) {
      if (call.tool !== "sub_agent") continue;
      let tasks = [];
      try {
        tasks = JSON.parse(call.args).tasks ?? [];
      } catch {
        tasks = [{ objective: "(arguments cut short in the live event; the stored step has them once written)" }];
      }
      out.push({ call, tasks });
    }
    return out;
  }
}

const LABEL_W = 130;
const ROW_H = 22;
const PAD = 6;

/// Draws the model as SVG, `now` closing the bars still open; `cursor` (ms since t0, or
/// null) dims what happened after it (replay).
export function drawTimeline(model, { width = 800, now = Date.now(), cursor = null } = {}) {
  const t0 = model.t0 ?? now;
  const end = Math.max(model.tEnd ?? now, t0 + 1, ...[...model.tools.values()].map((c) => c.end ?? now));
  const span = end - t0;
  const plotW = Math.max(200, width - LABEL_W - 20);
  const x = (t) => LABEL_W + ((t - t0) / span) * plotW;
  const rows = [];
  const shapes = [];
  const after = (t) => cursor !== null && t - t0 > cursor;
  let y = 24;

  const row = (label, cls = "") => {
    rows.push(svg("text", { x: 4, y: y + 15, class: `lane-label ${cls}` }, label));
    const top = y;
    y += ROW_H;
    return top;
  };
  const bar = (top, start, stop, cls, title, text) => {
    const bx = x(start);
    const w = Math.max(3, x(stop ?? now) - bx);
    const g = svg(
      "g",
      { class: `item ${after(start) ? "later" : ""}`, opacity: after(start) ? 0.15 : 1, tabindex: "0", role: "img", "aria-label": title },
      svg("rect", { class: `bar ${cls}`, x: bx, y: top + 3, width: w, height: ROW_H - 6, rx: 3 }, svg("title", {}, title)),
    );
    if (text && w > 40) g.append(svg("text", { class: "bar-label", x: bx + 4, y: top + 15 }, text));
    shapes.push(g);
  };
  const mark = (top, t, cls, title) => {
    shapes.push(
      svg(
        "g",
        { class: "item", opacity: after(t) ? 0.15 : 1, tabindex: "0", role: "img", "aria-label": title },
        svg("rect", { class: `mark ${cls}`, x: x(t) - 3, y: top + 3, width: 6, height: ROW_H - 6 }, svg("title", {}, title)),
      ),
    );
  };

  // LLM rounds.
  const llmTop = row("LLM rounds");
  for (const r of [...model.rounds.values()].sort((a, b) => a.round - b.round)) {
    bar(llmTop, r.start, r.end, "llm", `round ${r.round}: ${r.kind} (${r.model}), ${duration(r.end - r.start)}`, `round ${r.round}`);
  }
  // A round under way (no step yet): from its first delta.
  for (const [round, d] of model.deltaRounds) {
    if (!model.rounds.has(round)) bar(llmTop, d.first, model.tEnd ?? d.last, "llm", `round ${round}: streaming`, `round ${round}`);
  }

  // Tool calls, packed on rows so parallel calls do not overlap; sub-agents nest under theirs.
  const calls = [...model.tools.values()].sort((a, b) => a.start - b.start);
  const packed = [];
  for (const c of calls) {
    let r = packed.findIndex((last) => (last.end ?? now) <= c.start);
    if (r < 0) {
      packed.push(c);
      r = packed.length - 1;
    } else packed[r] = c;
    c.row = r;
  }
  const toolRows = Math.max(1, packed.length);
  const toolTops = [];
  for (let i = 0; i < toolRows; i++) toolTops.push(row(i === 0 ? "Tool calls" : ""));
  for (const c of calls) {
    const ms = c.ms ?? (c.end ? c.end - c.start : null);
    bar(toolTops[c.row], c.start, c.end, `tool ${c.status === "success" || c.status === "running" ? "" : "failed"} ${c.tool === "sub_agent" ? "sub" : ""}`, `${c.tool}: ${c.status}${ms !== null ? ", " + duration(ms) : ""}`, c.tool);
  }
  for (const { call, tasks } of model.subAgents()) {
    tasks.forEach((task, i) => {
      const top = row(`↳ sub-agent ${i + 1}`, "nested");
      bar(top, call.start, call.end, "sub", `sub-agent ${i + 1}: ${task.objective ?? ""}${task.mode ? " (" + task.mode + ")" : ""}`, task.objective ?? "");
    });
  }

  // Harness decisions and corrections.
  const harnessTop = row("Harness");
  for (const d of model.decisions) {
    mark(harnessTop, d.t, d.allowed ? "harness" : "rejected", `${d.name}: ${d.allowed ? "allowed" : "rejected"}${d.codes.length ? " (" + d.codes.join(", ") + ")" : ""}${d.messages.length ? " — " + d.messages.join("; ") : ""}`);
  }
  const correctionTop = row("Corrections");
  for (const c of model.corrections) mark(correctionTop, c.t, "correction", `candidate rejected (${c.codes.join(", ")})`);

  // The axis.
  const axis = svg("g", { class: "axis" });
  const step = niceStep(span / 6);
  for (let t = 0; t <= span + 1; t += step) {
    axis.append(svg("line", { x1: x(t0 + t), x2: x(t0 + t), y1: 16, y2: y }), svg("text", { x: x(t0 + t) + 2, y: 12 }, duration(t)));
  }
  if (cursor !== null) {
    axis.append(svg("line", { class: "cursor", x1: x(t0 + cursor), x2: x(t0 + cursor), y1: 16, y2: y, stroke: "currentColor" }));
  }
  return svg(
    "svg",
    { width, height: y + PAD, viewBox: `0 0 ${width} ${y + PAD}`, role: "group", "aria-label": `Run timeline, ${duration(span)}` },
    axis,
    ...rows,
    ...shapes,
  );
}

function niceStep(raw) {
  const steps = [10, 25, 50, 100, 250, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000];
  return steps.find((s) => s >= raw) ?? 600000;
}

/// The events as a table (the accessible, exact form of the timeline).
export function eventTable(model) {
  const t0 = model.t0 ?? 0;
  return h(
    "div",
    { class: "table-wrap event-list" },
    h(
      "table",
      {},
      h("caption", { class: "sr-only" }, "The run's events"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "at"), h("th", { scope: "col" }, "event"), h("th", { scope: "col" }, "detail"))),
      h(
        "tbody",
        {},
        model.events
          .filter((e) => e.data?.type !== "model.delta")
          .map((e) => {
            const d = e.data ?? {};
            return h("tr", {}, h("td", {}, d.created_at ? "+" + duration(d.created_at - t0) : ""), h("td", {}, d.type ?? e.event), h("td", {}, describe(e)));
          }),
      ),
    ),
  );
}

function describe(e) {
  const d = e.data?.data ?? {};
  const type = e.data?.type ?? "";
  if (e.event === "done") return `${e.data?.status ?? ""} ${e.data?.content ? "— " + e.data.content.slice(0, 120) : ""}`;
  if (e.event === "error") return e.data?.message ?? "";
  if (type === "action.started") return `${d.tool} ${d.arguments ?? ""}`.slice(0, 200);
  if (type === "action.finished") return `${d.tool} ${d.status} in ${duration(d.duration_ms)}`;
  if (type === "model.correction") return `rejected: ${(d.violation_codes ?? []).join(", ")}`;
  if (type.startsWith("harness.")) {
    const decision = d.decision ?? d;
    const verdict = decision.allowed === false || d.sent === false ? "rejected" : "allowed";
    return `${verdict}${(decision.violation_codes ?? []).length ? " — " + decision.violation_codes.join(", ") : ""}`;
  }
  if (type === "run.started") return `${d.agent ?? ""} · ${d.model ?? ""} · ${d.objective ?? ""}`.slice(0, 200);
  if (type === "run.failed" || type === "run.cancelled") return d.error ?? d.reason ?? "";
  return "";
}
