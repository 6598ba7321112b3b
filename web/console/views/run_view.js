// One run as the chat shows it: candidate text as it streams, corrections (the rejected
// candidate struck through, with the harness's reasons), tool calls as expandable steps
// (arguments, output, duration), notes from the harness, the error, and the run's files
// with download links and previews (images, CSV). Built from the run's live events, or
// from the stored messages and steps of a run that ended.

import { h, duration, bytes, pretty } from "../dom.js";
import { csvPreview } from "../csv.js";

export class RunView {
  constructor(runId, { status = "queued", model = "" } = {}) {
    this.runId = runId;
    this.status = status;
    this.textBlocks = []; // candidate blocks since the last correction
    this.current = null; // the text block deltas go to
    this.steps = new Map(); // call_id -> {details, summary parts}
    this.lastRejection = null; // the reasons of the last rejecting harness decision
    this.startedAt = null;
    this.endedAt = null;
    this.badge = h("span", { class: `badge ${status}` }, status);
    this.timing = h("span", { class: "dur" });
    this.modelLabel = h("span", {}, model);
    this.statusLine = h("span", { class: "sr-only", role: "status" });
    this.body = h("div", { class: "blocks" });
    this.filesEl = h("div", { class: "files" });
    this.el = h(
      "li",
      { class: "msg run", dataset: { run: runId }, "aria-label": "Agent run" },
      h(
        "div",
        { class: "run-meta" },
        this.badge,
        h("a", { href: `#/runs/${encodeURIComponent(runId)}`, class: "timeline-link" }, "Timeline"),
        this.modelLabel,
        this.timing,
        this.statusLine,
      ),
      this.body,
      this.filesEl,
    );
  }

  get ended() {
    return ["succeeded", "failed", "cancelled", "interrupted"].includes(this.status);
  }

  setStatus(status) {
    this.status = status;
    this.badge.className = `badge ${status}`;
    this.badge.textContent = status;
    this.el.setAttribute("aria-busy", this.ended ? "false" : "true");
    if (this.ended) {
      this.current?.classList.remove("streaming");
      this.statusLine.textContent = `Run ${status}`;
    }
  }

  setTiming(startMs, endMs) {
    if (startMs && endMs) this.timing.textContent = duration(endMs - startMs);
  }

  // --- live events ---

  /// One event of GET /runs/{id}/events ({event, id, data}).
  event({ event, data }) {
    if (event === "done") return this.done(data);
    if (event === "error") {
      this.body.append(h("p", { class: "run-error", role: "alert" }, data?.message || "The run failed."));
      return;
    }
    if (!data || typeof data !== "object") return;
    const type = data.type ?? "";
    const d = data.data ?? {};
    if (type === "run.started") {
      this.startedAt = data.created_at;
      this.modelLabel.textContent = d.model ?? "";
      this.setStatus("running");
    } else if (type === "model.delta") {
      this.delta(d.text ?? "");
    } else if (type === "model.correction") {
      this.correction(d.violation_codes ?? []);
    } else if (type === "action.started") {
      this.stepStarted(d.call_id, d.tool, d.arguments, data.created_at);
    } else if (type === "action.finished") {
      this.stepFinished(d.call_id, d.tool, d.status, d.output, d.duration_ms);
    } else if (type.startsWith("harness.")) {
      this.harness(type.slice("harness.".length), d);
    } else if (type === "context.compressed") {
      this.note(`Earlier turns were summarised before round ${d.round}: ${d.tokens_before} → ${d.tokens_after} tokens.`);
    } else if (type === "run.completed" || type === "run.failed" || type === "run.cancelled") {
      this.endedAt = data.created_at;
      this.setTiming(this.startedAt, this.endedAt);
    }
  }

  delta(text) {
    if (!this.current) {
      this.current = h("div", { class: "answer streaming", dataset: { candidate: "true" } });
      this.body.append(this.current);
      this.textBlocks.push(this.current);
    }
    this.current.append(text);
  }

  /// The harness rejected the candidate: every block since the last correction is struck
  /// through, and the reasons follow.
  correction(codes) {
    for (const block of this.textBlocks) {
      block.classList.remove("streaming");
      block.classList.add("rejected");
      block.dataset.candidate = "rejected";
      block.setAttribute("aria-label", "Rejected candidate answer");
    }
    this.textBlocks = [];
    this.current = null;
    const reasons = this.lastRejection?.messages?.length ? this.lastRejection.messages : [];
    this.body.append(
      h(
        "div",
        { class: "correction", dataset: { correction: "true" } },
        h("strong", {}, "The harness rejected this answer"),
        codes.length ? ` (${codes.join(", ")})` : "",
        reasons.length ? h("ul", {}, reasons.map((m) => h("li", {}, m))) : null,
      ),
    );
    this.lastRejection = null;
  }

  harness(name, d) {
    const decision = d.decision ?? d;
    if (decision && decision.allowed === false) {
      this.lastRejection = {
        name,
        messages: (decision.violations ?? []).map((v) => v.message).filter(Boolean),
        codes: decision.violation_codes ?? [],
      };
    }
    if (name === "continue_execution" || name.startsWith("correct_")) {
      if (d.sent) this.note(`Asked the model to try again (attempt ${d.attempt} of ${d.max_attempts}).`);
      else this.note(`No correction attempts left (${d.attempt} of ${d.max_attempts}).`);
    } else if (name === "switch_to_fallback_model") {
      this.note(`The provider failed (${d.failure}); switched to the fallback model ${d.model}.`);
    } else if (name === "recover_llm_round") {
      this.note("The model's round was unusable; the harness asked again.");
    }
  }

  note(text) {
    this.current?.classList.remove("streaming");
    this.current = null;
    this.body.append(h("p", { class: "note" }, text));
  }

  stepStarted(callId, tool, args) {
    this.current?.classList.remove("streaming");
    this.current = null;
    const step = this.makeStep(callId, tool, "running", args, null, null);
    this.body.append(step.el);
  }

  stepFinished(callId, tool, status, output, ms) {
    let step = this.steps.get(callId);
    if (!step) {
      step = this.makeStep(callId, tool, status, "", output, ms);
      this.body.append(step.el);
    }
    step.setStatus(status);
    step.setOutput(output);
    step.setDuration(ms);
  }

  makeStep(callId, tool, status, args, output, ms) {
    const badge = h("span", { class: `badge ${status}` }, status);
    const dur = h("span", { class: "dur" }, ms !== null && ms !== undefined ? duration(ms) : "");
    const argsPre = h("pre", { class: "args" }, pretty(args ?? ""));
    const outPre = h("pre", { class: "output" }, output !== null && output !== undefined ? pretty(output) : "…");
    const el = h(
      "details",
      { class: "step", dataset: { call: callId ?? "", tool: tool ?? "" } },
      h("summary", {}, h("span", { class: "tool" }, tool), badge, dur),
      h("div", { class: "body" }, h("h3", {}, "Arguments"), argsPre, h("h3", {}, "Output"), outPre),
    );
    const step = {
      el,
      setStatus(s) {
        badge.className = `badge ${s}`;
        badge.textContent = s;
      },
      setOutput(o) {
        if (o !== null && o !== undefined) outPre.textContent = pretty(o);
      },
      setDuration(m) {
        if (m !== null && m !== undefined) dur.textContent = duration(m);
      },
      setArgs(a) {
        argsPre.textContent = pretty(a);
      },
    };
    if (callId) this.steps.set(callId, step);
    return step;
  }

  /// The run's `done` event: the accepted answer, status, files.
  done(outcome) {
    if (!outcome || typeof outcome !== "object") return;
    this.setStatus(outcome.status ?? "succeeded");
    if (outcome.model) this.modelLabel.textContent = outcome.model;
    if (outcome.status === "succeeded" && typeof outcome.content === "string") {
      const last = this.textBlocks[this.textBlocks.length - 1];
      if (last) {
        last.textContent = outcome.content;
        last.classList.remove("streaming");
        last.dataset.candidate = "accepted";
      } else {
        this.body.append(h("div", { class: "answer", dataset: { candidate: "accepted" } }, outcome.content));
      }
    } else if (outcome.status !== "succeeded" && outcome.error && !this.body.querySelector(".run-error")) {
      this.body.append(h("p", { class: "run-error", role: "alert" }, outcome.error));
    }
    this.current = null;
    this.showFiles(outcome.files ?? []);
  }

  showFiles(files) {
    this.filesEl.replaceChildren(...files.map(fileCard));
  }

  // --- a run that ended, from what is stored ---

  /// `messages`: the run's stored messages (user messages excluded), in order; `steps`:
  /// its steps (on its final answer); `run`: its row from GET /runs (status, times).
  fromHistory(messages, steps, run) {
    const stepByCall = new Map();
    for (const s of steps ?? []) {
      if (s.kind === "tool" && s.input?.call_id) stepByCall.set(s.input.call_id, s);
    }
    const outputs = new Map();
    for (const m of messages) if (m.role === "tool" && m.tool_call_id) outputs.set(m.tool_call_id, m.content);
    const rejections = (steps ?? []).filter((s) => s.kind === "harness" && s.status === "rejected");
    let rejectionNoted = false;
    for (const m of messages) {
      if (m.role !== "assistant") continue;
      if (m.tool_calls?.length) {
        if (m.content) this.body.append(h("div", { class: "answer" }, m.content));
        for (const call of m.tool_calls) {
          const stored = stepByCall.get(call.id);
          const step = this.makeStep(call.id, call.name, stored?.status ?? "done", call.arguments, outputs.get(call.id) ?? null, stored?.input?.duration_ms ?? null);
          this.body.append(step.el);
        }
      } else {
        if (rejections.length && !rejectionNoted) {
          rejectionNoted = true;
          this.rejectionPlaceholder = h("div", { class: "rejections" });
          this.body.append(this.rejectionPlaceholder);
          for (const r of rejections) {
            const decision = r.output?.decision ?? r.output ?? {};
            const messages = (decision.violations ?? []).map((v) => v.message).filter(Boolean);
            if (!messages.length && !(decision.violation_codes ?? r.output?.violation_codes)?.length) continue;
            this.rejectionPlaceholder.append(
              h(
                "div",
                { class: "correction", dataset: { correction: "true" } },
                h("strong", {}, `The harness rejected a candidate answer (${r.name})`),
                messages.length ? h("ul", {}, messages.map((t) => h("li", {}, t))) : ` ${(decision.violation_codes ?? r.output?.violation_codes ?? []).join(", ")}`,
              ),
            );
          }
        }
        this.body.append(h("div", { class: "answer", dataset: { candidate: "accepted" } }, m.content));
      }
    }
    if (run) {
      this.setStatus(run.status);
      this.modelLabel.textContent = run.model ?? "";
      this.setTiming(run.started_at ?? run.created_at, run.finished_at);
      if (run.error && run.status !== "succeeded") this.body.append(h("p", { class: "run-error" }, run.error));
    }
    return rejections.length > 0;
  }

  /// The rejected candidates' text, replayed from the run's events (a stored run keeps
  /// only its accepted answer in its messages): shown struck through before the reasons.
  showRejectedText(texts) {
    if (!this.rejectionPlaceholder || !texts.length) return;
    const blocks = texts.map((t) =>
      h("div", { class: "answer rejected", dataset: { candidate: "rejected" }, "aria-label": "Rejected candidate answer" }, t),
    );
    this.rejectionPlaceholder.prepend(...blocks);
  }
}

/// The texts of a run's rejected candidates, from its events.
export function rejectedTexts(events) {
  const out = [];
  let pending = "";
  for (const e of events) {
    const type = e.data?.type;
    if (type === "model.delta") pending += e.data.data?.text ?? "";
    else if (type === "model.correction") {
      if (pending) out.push(pending);
      pending = "";
    } else if (type === "action.started") pending = "";
  }
  return out;
}

/// A file of a run: a download link (its signed, expiring link: no token in the URL) and
/// a preview for images and CSV.
export function fileCard(f) {
  const card = h(
    "div",
    { class: "file", dataset: { file: f.name } },
    h("a", { href: f.download_url, download: f.name, class: "download" }, `Download ${f.name}`),
    " ",
    h("small", {}, `${f.mime_type ?? ""} · ${bytes(f.size_bytes ?? 0)}`),
  );
  const type = f.mime_type ?? "";
  if (type.startsWith("image/")) {
    card.append(h("img", { src: f.download_url, alt: `Preview of ${f.name}`, loading: "lazy" }));
  } else if (type === "text/csv" || f.name?.endsWith(".csv")) {
    const holder = h("div", { class: "table-wrap" });
    card.append(holder);
    fetch(f.download_url)
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error(r.statusText))))
      .then((text) => holder.append(csvPreview(text, 20, `Preview of ${f.name}`)))
      .catch((e) => holder.append(h("p", { class: "note" }, `No preview: ${e.message}`)));
  }
  return card;
}
