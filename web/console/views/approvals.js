// Approvals inbox: the tool calls waiting for a human (issue 19). Each shows the tool, its
// arguments, why it needs approval, the agent and the run it belongs to (a link to the
// run's timeline, and the run's own message), and when it expires; approve or deny, with an
// optional note. The API decides who may see and decide what (a user their own runs, an
// admin all); a decision someone else made first shows the API's 409.

import { api } from "../api.js";
import { h, fill, when, alertBox, field, pretty } from "../dom.js";

const REFRESH_MS = 3000;

export async function render(main) {
  const abort = new AbortController();
  const list = h("div", { class: "items", id: "approvals", "aria-live": "polite" });
  const count = h("span", {});
  fill(main, h("h1", {}, "Approvals ", count), h("p", { class: "note" }, "Tool calls waiting for a human. A denial reaches the run as blocked evidence; an approval runs the call once."), list);
  const runs = new Map(); // run id -> its summary, asked once
  let timer = null;
  const load = async () => {
    clearTimeout(timer);
    try {
      const pending = await api("/approvals", { query: { limit: 200 }, signal: abort.signal });
      count.textContent = `(${pending.total ?? pending.data.length})`;
      // Cards being answered keep their state: only new ones are added, decided ones go.
      const shown = new Map([...list.querySelectorAll("[data-approval]")].map((el) => [el.dataset.approval, el]));
      const wanted = new Set(pending.data.map((a) => a.id));
      for (const [id, el] of shown) if (!wanted.has(id) && !el.dataset.busy) el.remove();
      for (const a of pending.data) if (!shown.has(a.id)) list.append(card(a, runs, load, abort.signal));
      // A notice of an earlier failed refresh, or of an empty inbox, is stale now.
      for (const stale of list.querySelectorAll(":scope > .note, :scope > .alert")) stale.remove();
      if (!list.querySelector("[data-approval]")) list.append(h("p", { class: "note" }, "Nothing waits for approval."));
    } catch (e) {
      if (e.name === "AbortError") return;
      fill(list, alertBox(e.message));
    }
    timer = setTimeout(load, REFRESH_MS);
  };
  await load();
  return () => {
    clearTimeout(timer);
    abort.abort();
  };
}

function card(a, runs, reload, signal) {
  const note = h("input", { type: "text", name: "note", maxlength: "500", placeholder: "optional" });
  const error = h("div", { role: "alert" });
  const context = h("p", { class: "hint" });
  const el = h(
    "article",
    { class: "card approval", dataset: { approval: a.id }, "aria-label": `Approval ${a.id}: ${a.tool}` },
    h(
      "div",
      { class: "item-head" },
      h("span", { class: "key" }, a.tool),
      h("span", { class: "badge queued" }, a.status ?? "pending"),
      h("span", { class: "badge" }, a.agent),
      h("small", {}, `asked ${when(a.created_at)}`, a.expires_at ? ` · denied at ${when(a.expires_at)} if nobody decides` : ""),
    ),
    a.reason ? h("p", {}, a.reason) : null,
    h("details", { class: "args", open: true }, h("summary", {}, "Arguments"), h("pre", { class: "code" }, pretty(a.arguments))),
    h("p", {}, "Run ", h("a", { href: `#/runs/${encodeURIComponent(a.run_id)}` }, a.run_id), ` · call ${a.call_id}`),
    context,
    field("Note", note),
    h(
      "div",
      { class: "item-actions" },
      h("button", { type: "button", class: "primary", onclick: () => decide("approve") }, "Approve"),
      h("button", { type: "button", class: "danger", onclick: () => decide("deny") }, "Deny"),
    ),
    error,
  );
  async function decide(decision) {
    fill(error);
    el.dataset.busy = "true";
    for (const b of el.querySelectorAll("button")) b.disabled = true;
    try {
      const answer = await api(`/approvals/${encodeURIComponent(a.id)}`, { method: "POST", body: { decision, note: note.value.trim() || undefined } });
      fill(el, h("p", { class: "ok-note", role: "status" }, `${a.tool}: ${answer.status} by ${answer.decided_by ?? "you"}.`));
      setTimeout(() => el.remove(), 4000);
    } catch (e) {
      delete el.dataset.busy;
      for (const b of el.querySelectorAll("button")) b.disabled = false;
      fill(error, alertBox(e.status === 409 ? `Already decided: ${e.message}` : e.message));
      reload();
    }
  }
  runContext(a.run_id, runs, signal).then((text) => {
    if (text) context.textContent = text;
  });
  return el;
}

/// The run's conversation: its last user message before the call, and the run's state,
/// for the reader to judge the call in context.
async function runContext(runId, runs, signal) {
  if (!runs.has(runId)) {
    runs.set(
      runId,
      (async () => {
        const run = await api(`/runs/${encodeURIComponent(runId)}`, { signal });
        const listed = await api(`/conversations/${encodeURIComponent(run.conversation_id)}/messages`, { query: { limit: 20 }, signal }).catch(() => null);
        const asked = [...(listed?.data ?? [])].reverse().find((m) => m.role === "user");
        return { run, asked: asked?.content ?? "" };
      })().catch(() => null),
    );
  }
  const found = await runs.get(runId);
  if (!found) return "";
  const text = typeof found.asked === "string" ? found.asked : JSON.stringify(found.asked);
  return [text ? `Asked: “${text.slice(0, 300)}”` : "", found.run.status ? `run ${found.run.status}` : ""].filter(Boolean).join(" · ");
}
