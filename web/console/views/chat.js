// Chat: the conversations (newest first, paged, with session search over the messages)
// and one conversation: its history, a composer with attachments, the live run (its
// events followed as they happen), a stop button and the queue policy of a message sent
// while a run is active.

import { api, upload, followRun, session, ApiError, prefetched } from "../api.js";
import { h, fill, when, alertBox } from "../dom.js";

// How a run looks (run_view.js, with the CSV reader) loads once a conversation is opened:
// the list, which the first paint shows, does not wait for it.
let runViews = null;
const loadRunViews = () => (runViews ??= import("./run_view.js"));

const PAGE = 50;
/// Runs this tab submitted and follows, by conversation (survives the page's re-render
/// when a new conversation gets its URL).
const submitted = new Map();

export async function render(main, params) {
  const conversationId = params[0] && params[0] !== "new" ? params[0] : null;
  const page = new ChatPage(main, conversationId, params[0] === "new");
  await page.start();
  return () => page.stop();
}

class ChatPage {
  constructor(main, conversationId, isNew) {
    this.main = main;
    this.conversationId = conversationId;
    this.isNew = isNew || !conversationId;
    this.abort = new AbortController();
    this.runs = new Map(); // run id -> RunView
    this.following = new Set();
    this.attachments = [];
    this.loaded = 0;
    this.total = 0;
    this.query = "";
  }

  stop() {
    this.abort.abort();
  }

  async start() {
    const searchInput = h("input", {
      type: "search",
      id: "conversation-search",
      placeholder: "Search messages  ( / )",
      autocomplete: "off",
      "data-search": true,
      "aria-controls": "conversation-list",
    });
    searchInput.addEventListener("input", () => this.searchSoon(searchInput.value));
    this.listEl = h("ul", { id: "conversation-list", "aria-label": "Conversations" });
    this.countEl = h("p", { class: "count", role: "status" });
    this.moreButton = h("button", { type: "button", class: "quiet", onclick: () => this.loadMore() }, "Load more");
    const aside = h(
      "aside",
      { class: "conversations", "aria-label": "Conversations" },
      h(
        "div",
        { class: "list-head" },
        h("label", { for: "conversation-search", class: "sr-only" }, "Search conversations"),
        searchInput,
        h("a", { href: "#/chat/new", class: "button-link", id: "new-chat" }, "New chat"),
      ),
      this.countEl,
      this.listEl,
      this.moreButton,
    );
    this.thread = h("section", { class: "thread", "aria-label": "Conversation" });
    this.layout = h("div", { class: "chat-layout", dataset: { selected: String(Boolean(this.conversationId) || this.isNew) } }, aside, this.thread);
    fill(this.main, this.layout);
    // The list first: it is what the first paint shows (the thread's own requests follow it).
    this.listing = this.loadList();
    this.renderThread();
    await this.listing;
  }

  // --- the list ---

  async loadList() {
    try {
      const answer = await (prefetched("conversations") ?? api("/conversations", { query: { limit: PAGE, offset: 0 }, signal: this.abort.signal }));
      this.loaded = answer.data.length;
      this.total = answer.total;
      fill(this.listEl, answer.data.map((c) => this.listItem(c)));
      this.showCount();
      performance.mark("console:conversations-listed");
    } catch (e) {
      if (e.name !== "AbortError") fill(this.listEl, h("li", {}, alertBox(e.message)));
    }
  }

  async loadMore() {
    const answer = await api("/conversations", {
      query: this.query ? { q: this.query, limit: PAGE, offset: this.loaded } : { limit: PAGE, offset: this.loaded },
      signal: this.abort.signal,
    });
    this.loaded += answer.data.length;
    this.total = answer.total;
    this.listEl.append(...answer.data.map((c) => this.listItem(c)));
    this.showCount();
  }

  showCount() {
    this.countEl.textContent = this.query
      ? `${this.total} conversation${this.total === 1 ? "" : "s"} match “${this.query}”`
      : `${this.total} conversation${this.total === 1 ? "" : "s"}`;
    this.moreButton.hidden = this.loaded >= this.total;
  }

  searchSoon(text) {
    clearTimeout(this.searchTimer);
    this.searchTimer = setTimeout(() => this.search(text.trim()), 250);
  }

  async search(text) {
    this.query = text;
    if (!text) return this.loadList();
    try {
      const answer = await api("/conversations", { query: { q: text, limit: PAGE }, signal: this.abort.signal });
      if (this.query !== text) return;
      this.loaded = answer.data.length;
      this.total = answer.total;
      fill(this.listEl, answer.data.map((c) => this.listItem(c)));
      this.showCount();
    } catch (e) {
      if (e.name !== "AbortError") fill(this.listEl, h("li", {}, alertBox(e.message)));
    }
  }

  listItem(c) {
    const current = c.id === this.conversationId;
    return h(
      "li",
      {},
      h(
        "a",
        { href: `#/chat/${encodeURIComponent(c.id)}`, "aria-current": current ? "true" : null, dataset: { conversation: c.id } },
        h("span", { class: "title" }, c.title || "(untitled)"),
        c.match ? h("span", { class: "snippet" }, highlight(c.match.snippet)) : null,
        h("small", {}, when(c.updated_at)),
      ),
    );
  }

  // --- the conversation ---

  renderThread() {
    this.titleEl = h("h1", { id: "thread-title" }, this.isNew ? "New conversation" : "Conversation");
    this.messagesEl = h("ol", { class: "messages", "aria-labelledby": "thread-title" });
    this.composer = this.buildComposer();
    fill(
      this.thread,
      h("div", { class: "thread-head" }, h("a", { href: "#/chat", class: "back" }, "← Conversations"), this.titleEl, this.agentPicker ?? null),
      this.messagesEl,
      this.composer,
    );
    if (this.isNew) {
      this.listing.finally(() => this.loadAgents());
      this.messagesEl.append(h("li", { class: "empty" }, "Ask anything; the answer streams here."));
      this.textarea.focus();
    } else {
      this.loadConversation();
    }
  }

  async loadAgents() {
    if (session.me?.scope === "agent") return; // the token's own agent answers
    try {
      const answer = await api("/agents", { query: { limit: 200 }, signal: this.abort.signal });
      const select = h("select", { id: "agent" }, answer.data.map((a) => h("option", { value: a.name }, a.name)));
      this.agentSelect = select;
      this.titleEl.after(h("label", { for: "agent" }, "Agent "), select);
    } catch (e) {
      if (e.name !== "AbortError") this.status(e.message, true);
    }
  }

  async loadConversation() {
    const id = this.conversationId;
    const signal = this.abort.signal;
    try {
      const [views, conversation, runs, files] = await Promise.all([
        loadRunViews(),
        api(`/conversations/${encodeURIComponent(id)}`, { signal }),
        api("/runs", { query: { conversation_id: id, limit: 200 }, signal }),
        api("/files", { query: { conversation_id: id }, signal }),
      ]);
      this.titleEl.textContent = conversation.title || "(untitled)";
      let messages = await api(`/conversations/${encodeURIComponent(id)}/messages`, { query: { steps: "true", limit: 200 }, signal });
      if (messages.total > messages.data.length) {
        messages = await api(`/conversations/${encodeURIComponent(id)}/messages`, {
          query: { steps: "true", limit: 200, offset: messages.total - 200 },
          signal,
        });
        this.messagesEl.append(h("li", { class: "note" }, `${messages.total - 200} earlier messages are not shown.`));
      }
      this.renderHistory(views, messages.data, runs.data, files.data);
      // Runs under way: follow them (those this tab submitted too, before their row existed).
      const active = runs.data.filter((r) => r.status === "queued" || r.status === "running").map((r) => r.run_id);
      for (const runId of new Set([...active, ...(submitted.get(id) ?? [])])) {
        if (!this.runs.has(runId) || !this.runs.get(runId).ended) this.follow(runId);
      }
      this.scrollDown();
    } catch (e) {
      if (e.name === "AbortError") return;
      this.messagesEl.append(h("li", {}, alertBox(e instanceof ApiError && e.status === 404 ? "No such conversation." : e.message)));
    }
  }

  renderHistory(views, messages, runs, files) {
    const runRows = new Map(runs.map((r) => [r.run_id, r]));
    const filesByRun = new Map();
    for (const f of files) {
      if (!f.run_id) continue;
      if (!filesByRun.has(f.run_id)) filesByRun.set(f.run_id, []);
      filesByRun.get(f.run_id).push(f);
    }
    // Messages grouped by run, in order: the user's message(s), then the run's own.
    const groups = [];
    for (const m of messages) {
      const last = groups[groups.length - 1];
      if (last && m.run_id && last.runId === m.run_id) last.messages.push(m);
      else groups.push({ runId: m.run_id ?? null, messages: [m] });
    }
    for (const g of groups) {
      for (const m of g.messages.filter((m) => m.role === "user")) this.messagesEl.append(userBubble(m.content));
      if (!g.runId) continue;
      const view = new views.RunView(g.runId);
      const own = g.messages.filter((m) => m.role !== "user");
      const final = own.find((m) => m.steps);
      const hadRejection = view.fromHistory(own, final?.steps ?? [], runRows.get(g.runId));
      view.showFiles(filesByRun.get(g.runId) ?? []);
      this.runs.set(g.runId, view);
      this.messagesEl.append(view.el);
      if (hadRejection) this.replayRejections(views, g.runId, view);
    }
  }

  /// A stored run keeps only its accepted answer: the rejected candidates come from its events.
  async replayRejections(views, runId, view) {
    const events = [];
    try {
      await followRun(runId, (e) => events.push(e), { signal: this.abort.signal });
      view.showRejectedText(views.rejectedTexts(events));
    } catch {
      // The reasons are shown already; only the struck-through text is missing.
    }
  }

  /// Follows a run's events into its view (creating the view for a run not shown yet).
  async follow(runId) {
    if (this.following.has(runId)) return;
    this.following.add(runId);
    // A fresh view, in the place of the one the history drew: the events replay it all.
    const { RunView } = await loadRunViews();
    const old = this.runs.get(runId);
    const view = new RunView(runId);
    this.runs.set(runId, view);
    if (old) old.el.replaceWith(view.el);
    else this.messagesEl.append(view.el);
    this.updateActive();
    try {
      await followRun(
        runId,
        (e) => {
          view.event(e);
          if (e.event === "done") this.updateActive();
          this.scrollDown(true);
        },
        { signal: this.abort.signal },
      );
    } catch (e) {
      if (e.name !== "AbortError") view.body.append(alertBox(`Lost the run's events: ${e.message}`));
    } finally {
      this.following.delete(runId);
      const mine = submitted.get(this.conversationId);
      mine?.delete(runId);
      this.updateActive();
    }
  }

  activeRuns() {
    return [...this.runs.values()].filter((v) => !v.ended && this.following.has(v.runId));
  }

  updateActive() {
    const active = this.activeRuns().length > 0;
    this.stopButton.hidden = !active;
    this.policyField.hidden = !active;
  }

  scrollDown(onlyIfNear = false) {
    const el = this.messagesEl;
    if (!onlyIfNear || el.scrollHeight - el.scrollTop - el.clientHeight < 160) el.scrollTop = el.scrollHeight;
  }

  // --- the composer ---

  buildComposer() {
    this.textarea = h("textarea", {
      id: "message",
      rows: "2",
      placeholder: "Message — Enter sends, Shift+Enter starts a new line",
    });
    this.textarea.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    const fileInput = h("input", { type: "file", id: "attach", multiple: true, class: "sr-only" });
    fileInput.addEventListener("change", () => {
      for (const f of fileInput.files) this.attach(f);
      fileInput.value = "";
    });
    this.chips = h("div", { class: "attachments", "aria-label": "Attached files" });
    this.policy = h(
      "select",
      { id: "queue-policy", "aria-describedby": "queue-policy-help" },
      h("option", { value: "" }, "agent's default"),
      h("option", { value: "followup" }, "follow up: run next"),
      h("option", { value: "steer" }, "steer: join the active run"),
      h("option", { value: "interrupt" }, "interrupt: cancel it, run this"),
      h("option", { value: "collect" }, "collect: merge waiting messages"),
    );
    this.policyField = h(
      "span",
      { class: "policy", hidden: true },
      h("label", { for: "queue-policy" }, "While a run is active: "),
      this.policy,
      h("span", { id: "queue-policy-help", class: "sr-only" }, "How a message sent while a run is active is queued"),
    );
    this.stopButton = h("button", { type: "button", class: "danger", id: "stop", hidden: true, onclick: () => this.stopRuns() }, "Stop");
    this.sendButton = h("button", { type: "submit", class: "primary", id: "send" }, "Send");
    this.statusEl = h("div", { class: "status", "aria-live": "polite" });
    const form = h(
      "form",
      { class: "composer", "aria-label": "New message" },
      this.chips,
      h("label", { for: "message", class: "sr-only" }, "Message"),
      this.textarea,
      h(
        "div",
        { class: "row" },
        h("span", { class: "file-picker" }, fileInput, h("label", { for: "attach", class: "button-like" }, "Attach files")),
        h("span", { class: "grow" }),
        this.policyField,
        this.stopButton,
        this.sendButton,
      ),
      this.statusEl,
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.send();
    });
    return form;
  }

  status(text, isError = false) {
    fill(this.statusEl, text ? (isError ? alertBox(text) : h("p", { class: "note" }, text)) : null);
  }

  attach(file) {
    const item = { file, record: null, failed: null };
    const label = h("span", {}, `${file.name} (uploading…)`);
    const remove = h("button", { type: "button", "aria-label": `Remove ${file.name}` }, "×");
    const chip = h("span", { class: "chip", dataset: { attachment: file.name } }, label, remove);
    remove.addEventListener("click", () => {
      this.attachments = this.attachments.filter((a) => a !== item);
      chip.remove();
    });
    this.attachments.push(item);
    this.chips.append(chip);
    item.uploading = upload(file, this.abort.signal)
      .then((record) => {
        item.record = record;
        label.textContent = file.name;
        chip.dataset.uploaded = "true";
      })
      .catch((e) => {
        item.failed = e.message;
        label.textContent = `${file.name}: ${e.message}`;
        chip.classList.add("alert");
      });
  }

  async send() {
    const text = this.textarea.value.trim();
    if (!text) {
      this.status("Write a message first.", true);
      this.textarea.focus();
      return;
    }
    await Promise.all(this.attachments.map((a) => a.uploading));
    if (this.attachments.some((a) => a.failed)) {
      this.status("Remove the files that failed to upload, or attach them again.", true);
      return;
    }
    const body = { message: text };
    if (this.conversationId) body.conversation_id = this.conversationId;
    else if (this.agentSelect) body.agent = this.agentSelect.value;
    const files = this.attachments.map((a) => a.record.id);
    if (files.length) body.files = files;
    if (this.activeRuns().length && this.policy.value) body.queue_policy = this.policy.value;
    this.sendButton.disabled = true;
    this.status("");
    try {
      const run = await api("/runs", { method: "POST", body });
      this.textarea.value = "";
      this.attachments = [];
      this.chips.replaceChildren();
      if (!submitted.has(run.conversation_id)) submitted.set(run.conversation_id, new Set());
      submitted.get(run.conversation_id).add(run.run_id);
      if (!this.conversationId) {
        location.hash = `#/chat/${encodeURIComponent(run.conversation_id)}`;
        return;
      }
      this.messagesEl.querySelector(".empty")?.remove();
      if (!this.runs.has(run.run_id)) {
        this.messagesEl.append(userBubble(text));
        this.follow(run.run_id);
      } else {
        // Steered into the active run: the message joins it.
        this.runs.get(run.run_id).el.before(userBubble(text));
      }
      this.scrollDown();
    } catch (e) {
      this.status(e.message, true);
    } finally {
      this.sendButton.disabled = false;
      this.textarea.focus();
    }
  }

  async stopRuns() {
    this.stopButton.disabled = true;
    try {
      for (const view of this.activeRuns()) {
        try {
          await api(`/runs/${encodeURIComponent(view.runId)}`, { method: "DELETE" });
          this.status("Stopping…");
        } catch (e) {
          if (!(e instanceof ApiError && e.status === 409)) throw e;
        }
      }
    } catch (e) {
      this.status(e.message, true);
    } finally {
      this.stopButton.disabled = false;
    }
  }
}

function userBubble(text) {
  return h("li", { class: "msg user", "aria-label": "Your message" }, text);
}

/// A search snippet with its matched words (between [ and ]) marked.
function highlight(snippet) {
  const parts = [];
  const re = /\[([^\]]*)\]/g;
  let at = 0;
  let m;
  while ((m = re.exec(snippet))) {
    if (m.index > at) parts.push(snippet.slice(at, m.index));
    parts.push(h("mark", {}, m[1]));
    at = m.index + m[0].length;
  }
  parts.push(snippet.slice(at));
  return parts;
}
