// Memory review: the candidates waiting for review first, then the active items (or any
// status, kind, or words); each item approved, dismissed, edited, pinned, given an expiry
// or forgotten, with its revisions and evidence (where it came from, which runs used it).

import { api } from "../api.js";
import { h, fill, when, alertBox, field } from "../dom.js";

const KINDS = ["preference", "profile", "fact", "decision", "procedure", "constraint"];

export async function render(main) {
  const abort = new AbortController();
  const status = h(
    "select",
    { id: "memory-status" },
    h("option", { value: "active" }, "active"),
    h("option", { value: "" }, "any status"),
    ["superseded", "dismissed", "deleted"].map((s) => h("option", { value: s }, s)),
  );
  const kind = h("select", { id: "memory-kind" }, h("option", { value: "" }, "any kind"), KINDS.map((k) => h("option", { value: k }, k)));
  const words = h("input", { type: "search", id: "memory-q", placeholder: "words in key or content", "data-search": true });
  const candidates = h("div", { class: "items", id: "candidates" });
  const others = h("div", { class: "items", id: "memories" });
  const candidateCount = h("span", {});
  fill(
    main,
    h("h1", {}, "Memory"),
    h("h2", {}, "Candidates waiting for review ", candidateCount),
    candidates,
    h("h2", {}, "Memories"),
    h("div", { class: "toolbar" }, field("Status", status), field("Kind", kind), field("Search", words)),
    others,
    h("h2", {}, "Add a memory"),
    addForm(() => load()),
  );
  const load = async () => {
    try {
      const [waiting, listed] = await Promise.all([
        api("/memories", { query: { status: "candidate", limit: 200 }, signal: abort.signal }),
        api("/memories", { query: { status: status.value, kind: kind.value, q: words.value.trim(), limit: 100 }, signal: abort.signal }),
      ]);
      candidateCount.textContent = `(${waiting.total})`;
      fill(candidates, waiting.data.length ? waiting.data.map((m) => itemCard(m, load)) : h("p", { class: "note" }, "Nothing waits for review."));
      const rest = listed.data.filter((m) => m.status !== "candidate");
      fill(others, rest.length ? rest.map((m) => itemCard(m, load)) : h("p", { class: "note" }, "No memory matches."));
    } catch (e) {
      if (e.name !== "AbortError") fill(others, alertBox(e.message));
    }
  };
  let timer;
  for (const control of [status, kind]) control.addEventListener("change", load);
  words.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(load, 250);
  });
  await load();
  return () => abort.abort();
}

function itemCard(m, reload) {
  const error = h("div", { role: "alert" });
  const act = async (label, request) => {
    fill(error);
    try {
      await request();
      reload();
    } catch (e) {
      fill(error, alertBox(`${label}: ${e.message}`));
    }
  };
  const patch = (body) => api(`/memories/${encodeURIComponent(m.id)}`, { method: "PATCH", body });
  const content = h("p", { class: "content-text" }, m.content);
  const actions = h("div", { class: "item-actions" });
  if (m.status === "candidate") {
    actions.append(
      h("button", { type: "button", class: "primary", onclick: () => act("Approve", () => patch({ status: "active" })) }, "Approve"),
      h("button", { type: "button", onclick: () => act("Dismiss", () => patch({ status: "dismissed" })) }, "Dismiss"),
    );
  }
  if (m.status === "candidate" || m.status === "active") {
    actions.append(
      h("button", { type: "button", onclick: () => editForm(m, content, actions, error, reload) }, "Edit"),
      h("button", { type: "button", "aria-pressed": String(m.pinned), onclick: () => act(m.pinned ? "Unpin" : "Pin", () => patch({ pinned: !m.pinned })) }, m.pinned ? "Unpin" : "Pin"),
      expiryControl(m, act, patch),
      h("button", { type: "button", class: "danger", onclick: () => act("Forget", () => api(`/memories/${encodeURIComponent(m.id)}`, { method: "DELETE" })) }, "Forget"),
    );
  }
  const history = h("details", { class: "history" }, h("summary", {}, "Revisions and evidence"));
  history.addEventListener("toggle", () => {
    if (history.open && !history.dataset.loaded) {
      history.dataset.loaded = "true";
      loadHistory(m, history);
    }
  });
  return h(
    "article",
    { class: "card memory", dataset: { memory: m.id, key: m.key }, "aria-label": `Memory ${m.key}` },
    h(
      "div",
      { class: "item-head" },
      h("span", { class: "key" }, m.key),
      h("span", { class: `badge ${m.status}` }, m.status),
      h("span", { class: "badge" }, m.kind),
      h("span", { class: "badge" }, m.scope === "user" ? "all agents" : "one agent"),
      m.pinned ? h("span", { class: "badge" }, "pinned") : null,
      m.sensitivity === "sensitive" ? h("span", { class: "badge queued" }, "sensitive") : null,
      m.expires_at ? h("span", { class: "badge" }, `expires ${when(m.expires_at)}`) : null,
      h("small", {}, `importance ${m.importance} · confidence ${m.confidence} · ${when(m.updated_at)}`),
    ),
    content,
    m.summary ? h("p", { class: "hint" }, `Summary: ${m.summary}`) : null,
    actions,
    error,
    history,
  );
}

function expiryControl(m, act, patch) {
  const input = h("input", { type: "datetime-local", "aria-label": `Expiry of ${m.key}` });
  if (m.expires_at) input.value = new Date(m.expires_at - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16);
  const set = h("button", { type: "button" }, "Set expiry");
  set.addEventListener("click", () => act("Expire", () => patch({ expires_at: input.value ? new Date(input.value).getTime() : null })));
  const now = h("button", { type: "button", onclick: () => act("Expire", () => patch({ expires_at: Date.now() })) }, "Expire now");
  return h("span", { class: "expiry" }, input, set, now);
}

function editForm(m, content, actions, error, reload) {
  const text = h("textarea", { id: `edit-${m.id}`, rows: "4" });
  text.value = m.content;
  const summary = h("input", { id: `summary-${m.id}` });
  summary.value = m.summary ?? "";
  const form = h(
    "form",
    { class: "editor" },
    field("Content", text),
    field("Summary", summary, "shown instead of content longer than 700 characters"),
    h("div", { class: "item-actions" }, h("button", { type: "submit", class: "primary" }, "Save"), h("button", { type: "button", onclick: () => form.replaceWith(content) }, "Cancel")),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    fill(error);
    try {
      await api(`/memories/${encodeURIComponent(m.id)}`, { method: "PATCH", body: { content: text.value, summary: summary.value } });
      reload();
    } catch (err) {
      fill(error, alertBox(err.message));
    }
  });
  content.replaceWith(form);
  text.focus();
}

async function loadHistory(m, holder) {
  try {
    const [revisions, evidence] = await Promise.all([
      api(`/memories/${encodeURIComponent(m.id)}/revisions`, { query: { limit: 200 } }),
      api(`/memories/${encodeURIComponent(m.id)}/evidence`, { query: { limit: 200 } }),
    ]);
    holder.append(
      h("h3", {}, "Revisions"),
      h(
        "table",
        {},
        h("thead", {}, h("tr", {}, ["when", "action", "by", "status", "content"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, revisions.data.map((r) => h("tr", {}, h("td", {}, when(r.created_at)), h("td", {}, r.action), h("td", {}, r.actor), h("td", {}, r.status), h("td", {}, r.content)))),
      ),
      h("h3", {}, "Evidence"),
      evidence.data.length
        ? h(
            "table",
            {},
            h("thead", {}, h("tr", {}, ["when", "relation", "where"].map((c) => h("th", { scope: "col" }, c)))),
            h(
              "tbody",
              {},
              evidence.data.map((e) =>
                h(
                  "tr",
                  {},
                  h("td", {}, when(e.created_at)),
                  h("td", {}, e.relation === "used" ? "used by a run" : "source"),
                  h(
                    "td",
                    {},
                    e.run_id ? h("a", { href: `#/runs/${encodeURIComponent(e.run_id)}` }, `run ${e.run_id.slice(0, 8)}`) : null,
                    " ",
                    e.conversation_id ? h("a", { href: `#/chat/${encodeURIComponent(e.conversation_id)}` }, "conversation") : null,
                    e.source && !e.run_id ? e.source : null,
                  ),
                ),
              ),
            ),
          )
        : h("p", { class: "note" }, "No evidence recorded."),
    );
  } catch (e) {
    holder.append(alertBox(e.message));
  }
}

function addForm(done) {
  const key = h("input", { required: true });
  const content = h("textarea", { rows: "3", required: true });
  const kind = h("select", {}, KINDS.map((k) => h("option", { value: k, selected: k === "fact" }, k)));
  const asCandidate = h("input", { type: "checkbox" });
  const out = h("div", {});
  const form = h(
    "form",
    { class: "editor card", id: "memory-add" },
    field("Key", key),
    field("Content", content),
    field("Kind", kind),
    h("label", {}, asCandidate, " Propose as a candidate (needs review)"),
    h("div", { class: "item-actions" }, h("button", { type: "submit", class: "primary" }, "Save memory")),
    out,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    fill(out);
    try {
      const answer = await api("/memories", {
        method: "POST",
        body: { key: key.value.trim(), content: content.value, kind: kind.value, status: asCandidate.checked ? "candidate" : "active" },
      });
      fill(out, h("p", { class: "ok-note", role: "status" }, `Saved: ${answer.outcome}.`));
      key.value = "";
      content.value = "";
      done();
    } catch (err) {
      fill(out, alertBox(err.message));
    }
  });
  return form;
}
