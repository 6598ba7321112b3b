// Settings: agents, providers (keys write-only), custom tools, MCP servers, skills (read:
// they are folders, docs/skills.md), channels (with
// their threads, outbox and dead letters), users and tokens. Every form sends what the API
// takes and shows the API's own error (which names the field) next to the form. Agents,
// providers, users and tokens have forms of fields; tools, MCP servers and channels, whose
// shapes depend on their kind, are edited as the JSON the API takes.

import { api } from "../api.js";
import { h, fill, when, alertBox, field, pretty } from "../dom.js";

const tabs = {
  agents: { label: "Agents", render: agents },
  providers: { label: "Providers", render: providers },
  tools: { label: "Tools", render: tools },
  mcp: { label: "MCP servers", render: mcp },
  skills: { label: "Skills", render: skills },
  channels: { label: "Channels", render: channels },
  users: { label: "Users and tokens", render: users },
};

export async function render(main, params) {
  const name = tabs[params[0]] ? params[0] : "agents";
  const body = h("div", { id: `settings-${name}` });
  fill(
    main,
    h("h1", {}, "Settings"),
    h(
      "nav",
      { class: "tabs", "aria-label": "Settings" },
      Object.entries(tabs).map(([key, t]) => h("a", { href: `#/settings/${key}`, "aria-current": key === name ? "page" : null }, t.label)),
    ),
    body,
  );
  try {
    await tabs[name].render(body, params.slice(1));
  } catch (e) {
    body.append(alertBox(e.status === 403 ? "This page needs an admin token." : e.message));
  }
}

/// A form whose submit runs `send(values)`; errors from the API show under it.
function form(id, controls, submitLabel, send, after) {
  const out = h("div", { class: "form-result" });
  const el = h("form", { class: "editor card", id }, controls, h("div", { class: "item-actions" }, h("button", { type: "submit", class: "primary" }, submitLabel)), out);
  el.addEventListener("submit", async (e) => {
    e.preventDefault();
    fill(out);
    const button = el.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const answer = await send();
      fill(out, after ? after(answer) : h("p", { class: "ok-note", role: "status" }, "Saved."));
    } catch (err) {
      fill(out, alertBox(err.message));
    } finally {
      button.disabled = false;
    }
  });
  return el;
}

function input(name, value = "", attrs = {}) {
  const el = h("input", { name, ...attrs });
  el.value = value ?? "";
  return el;
}

function textarea(name, value = "", rows = 4) {
  const el = h("textarea", { name, rows: String(rows) });
  el.value = value ?? "";
  return el;
}

function select(name, options, value) {
  return h("select", { name }, options.map((o) => h("option", { value: o, selected: o === value }, o || "(none)")));
}

function table(columns, rows) {
  return h(
    "div",
    { class: "table-wrap" },
    h("table", {}, h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)),
  );
}

function parseJson(text, what) {
  try {
    return text.trim() ? JSON.parse(text) : {};
  } catch (e) {
    throw new Error(`${what}: not valid JSON (${e.message})`);
  }
}

// --- agents ---

async function agents(body) {
  const [list, providerList] = await Promise.all([api("/agents", { query: { limit: 200 } }), api("/providers", { query: { limit: 200 } }).catch(() => ({ data: [] }))]);
  const reload = () => agents(fill(body));
  const editor = (a) => {
    const f = {
      name: input("name", a?.name, { required: true }),
      main_model: input("main_model", a?.main_model, { required: true }),
      fast_model: input("fast_model", a?.fast_model),
      fallback_model: input("fallback_model", a?.fallback_model),
      provider_id: select("provider_id", ["", ...providerList.data.map((p) => String(p.id))], a?.provider_id ? String(a.provider_id) : ""),
      system_prompt: textarea("system_prompt", a?.system_prompt),
      tools: input("tools", (a?.tools ?? []).join(", "), { placeholder: "shell, read, write" }),
      limits: textarea("limits", a ? JSON.stringify(a.limits ?? {}, null, 2) : "{}", 3),
      queue_policy: select("queue_policy", ["followup", "steer", "interrupt", "collect"], a?.queue_policy ?? "followup"),
    };
    return form(
      a ? `agent-${a.id}` : "agent-new",
      [
        field("Name", f.name),
        field("Main model", f.main_model),
        field("Fast model", f.fast_model),
        field("Fallback model", f.fallback_model),
        field("Provider", f.provider_id, providerList.data.map((p) => `${p.id}: ${p.name}`).join(", ")),
        field("System prompt", f.system_prompt),
        field("Tools", f.tools, "tool names, comma-separated"),
        field("Limits (JSON)", f.limits, "max_rounds, timeout_s, context_window, memory keys, web_search"),
        field("Queue policy", f.queue_policy, "what a message does while a run is active"),
      ],
      a ? "Save agent" : "Create agent",
      async () => {
        const value = {
          name: f.name.value.trim(),
          main_model: f.main_model.value.trim(),
          fast_model: f.fast_model.value.trim(),
          fallback_model: f.fallback_model.value.trim(),
          provider_id: f.provider_id.value ? Number(f.provider_id.value) : null,
          system_prompt: f.system_prompt.value,
          tools: f.tools.value.split(",").map((t) => t.trim()).filter(Boolean),
          limits: parseJson(f.limits.value, "limits"),
          queue_policy: f.queue_policy.value,
        };
        const answer = await api(a ? `/agents/${encodeURIComponent(a.id)}` : "/agents", { method: a ? "PATCH" : "POST", body: value });
        setTimeout(reload, 600);
        return answer;
      },
    );
  };
  body.append(
    table(
      ["name", "models", "tools", "queue", ""],
      list.data.map((a) =>
        h(
          "tr",
          {},
          h("td", {}, a.name),
          h("td", {}, [a.main_model, a.fast_model, a.fallback_model].filter(Boolean).join(" · ")),
          h("td", {}, (a.tools ?? []).join(", ")),
          h("td", {}, a.queue_policy),
          h("td", {}, editButton(a.name, () => editor(a)), deleteButton(`/agents/${encodeURIComponent(a.id)}`, a.name, reload)),
        ),
      ),
    ),
    h("h2", {}, "New agent"),
    editor(null),
  );
}

/// A button that opens `make()` (a form) in a row under the table.
function editButton(name, make) {
  const button = h("button", { type: "button", "aria-label": `Edit ${name}` }, "Edit");
  button.addEventListener("click", () => {
    const row = button.closest("tr");
    if (row.nextElementSibling?.classList.contains("edit-row")) {
      row.nextElementSibling.remove();
      return;
    }
    const cells = row.children.length;
    row.after(h("tr", { class: "edit-row" }, h("td", { colspan: String(cells) }, make())));
    row.nextElementSibling.querySelector("input, textarea, select")?.focus();
  });
  return button;
}

function deleteButton(path, name, reload, label = "Delete") {
  const out = h("span");
  const button = h("button", { type: "button", class: "danger", "aria-label": `${label} ${name}` }, label);
  button.addEventListener("click", async () => {
    if (!confirm(`${label} ${name}?`)) return;
    try {
      await api(path, { method: "DELETE" });
      reload();
    } catch (e) {
      fill(out, alertBox(e.message));
    }
  });
  return h("span", {}, button, out);
}

// --- providers ---

async function providers(body) {
  const list = await api("/providers", { query: { limit: 200 } });
  const reload = () => providers(fill(body));
  const kinds = ["openai", "openai-compatible", "openrouter", "qwen", "kimi", "claude", "anthropic"];
  const editor = (p) => {
    const f = {
      name: input("name", p?.name, { required: true }),
      kind: select("kind", kinds, p?.kind ?? "openai-compatible"),
      base_url: input("base_url", p?.base_url, { placeholder: "https://…/v1" }),
      api_key: input("api_key", "", { type: "password", autocomplete: "new-password", placeholder: p?.has_api_key ? "a key is set: leave empty to keep it" : "" }),
      api_key_ref: input("api_key_ref", p?.api_key_ref, { placeholder: "TROUPE_KEY_…" }),
      config: textarea("config", JSON.stringify(p?.config ?? {}, null, 2), 3),
    };
    return form(
      p ? `provider-${p.id}` : "provider-new",
      [
        field("Name", f.name),
        field("Kind", f.kind),
        field("Base URL", f.base_url),
        field("API key", f.api_key, "write-only: stored encrypted, never shown again"),
        field("Key variable", f.api_key_ref, "or the environment variable holding the key"),
        field("Config (JSON)", f.config),
      ],
      p ? "Save provider" : "Create provider",
      async () => {
        const value = { name: f.name.value.trim(), kind: f.kind.value, base_url: f.base_url.value.trim(), api_key_ref: f.api_key_ref.value.trim(), config: parseJson(f.config.value, "config") };
        if (f.api_key.value) value.api_key = f.api_key.value;
        const answer = await api(p ? `/providers/${p.id}` : "/providers", { method: p ? "PATCH" : "POST", body: value });
        f.api_key.value = "";
        setTimeout(reload, 600);
        return answer;
      },
    );
  };
  const models = (p) => {
    const out = h("span");
    const b = h("button", { type: "button" }, "Models");
    b.addEventListener("click", async () => {
      try {
        const m = await api(`/providers/${p.id}/models`);
        fill(out, " ", m.data.map((x) => x.id).join(", ") || "(none)");
      } catch (e) {
        fill(out, alertBox(e.message));
      }
    });
    return h("span", {}, b, out);
  };
  body.append(
    table(
      ["id", "name", "kind", "base URL", "key", ""],
      list.data.map((p) =>
        h(
          "tr",
          {},
          h("td", {}, String(p.id)),
          h("td", {}, p.name),
          h("td", {}, p.kind),
          h("td", {}, p.base_url),
          h("td", {}, p.has_api_key ? "set (hidden)" : p.api_key_ref ? `from ${p.api_key_ref}` : "none"),
          h("td", {}, editButton(p.name, () => editor(p)), models(p), deleteButton(`/providers/${p.id}`, p.name, reload)),
        ),
      ),
    ),
    h("h2", {}, "New provider"),
    editor(null),
  );
}

// --- tools (JSON) ---

async function tools(body) {
  const list = await api("/tools", { query: { limit: 200 } });
  const reload = () => tools(fill(body));
  const editor = (t) => {
    const json = textarea("tool", pretty(t ? withoutKeys(t, ["declared"]) : { name: "", kind: "http", description: "", method: "GET", url: "https://", parameters: { type: "object", properties: {} } }), 12);
    return form(t ? `tool-${t.name}` : "tool-new", [field("Tool (JSON, as the API takes it)", json, "fields and rules: docs/tools.md")], t ? "Save tool" : "Create tool", async () => {
      const value = parseJson(json.value, "tool");
      if (t) delete value.name;
      const answer = await api(t ? `/tools/${encodeURIComponent(t.name)}` : "/tools", { method: t ? "PATCH" : "POST", body: value });
      setTimeout(reload, 600);
      return answer;
    });
  };
  body.append(
    table(
      ["name", "kind", "enabled", "agents", ""],
      list.data.map((t) =>
        h(
          "tr",
          {},
          h("td", {}, t.name),
          h("td", {}, t.kind),
          h("td", {}, String(t.enabled)),
          h("td", {}, (t.agents ?? []).join(", ") || "all"),
          h("td", {}, t.declared ? h("small", {}, "config file") : [editButton(t.name, () => editor(t)), deleteButton(`/tools/${encodeURIComponent(t.name)}`, t.name, reload)]),
        ),
      ),
    ),
    h("h2", {}, "New tool"),
    editor(null),
  );
}

function withoutKeys(o, keys) {
  const copy = { ...o };
  for (const k of keys) delete copy[k];
  return copy;
}

// --- MCP servers (JSON: the whole set) ---

async function mcp(body) {
  const current = await api("/runtime/mcp");
  const rows = current.servers.map((s) =>
    h(
      "tr",
      {},
      h("td", {}, s.name),
      h("td", {}, s.transport ?? (s.url ? "http" : "stdio")),
      h("td", {}, h("span", { class: `badge ${s.status?.state === "ready" ? "active" : "queued"}` }, s.status?.state ?? "?"), s.status?.error ? h("small", {}, " " + s.status.error) : null),
      h("td", {}, (s.status?.tools ?? []).map((t) => (typeof t === "string" ? t : t.name)).join(", ")),
      h("td", {}, `${s.status?.calls_total ?? 0} calls · ${s.status?.restarts ?? 0} restarts`),
    ),
  );
  const json = textarea("servers", pretty({ servers: current.servers.map((s) => withoutKeys(s, ["status"])) }), 14);
  body.append(
    table(["name", "transport", "state", "tools", "use"], rows),
    h("h2", {}, "Edit the set"),
    form(
      "mcp-servers",
      [field("Servers (JSON)", json, "the whole set replaces the current one; values shown as <redacted> must be given again or removed (docs/api.md)")],
      "Apply",
      async () => {
        const answer = await api("/runtime/mcp", { method: "PUT", body: parseJson(json.value, "servers") });
        setTimeout(() => mcp(fill(body)), 600);
        return answer;
      },
    ),
  );
}

// --- skills (read-only: SKILL.md folders on the node; the problems of broken ones) ---

async function skills(body) {
  const list = await api("/skills");
  const detail = h("div", { id: "skill-detail" });
  const show = async (name) => {
    const s = await api(`/skills/${encodeURIComponent(name)}`);
    fill(detail, h("article", { class: "card" }, h("h2", {}, s.name), h("p", {}, s.description), h("p", { class: "hint" }, s.file), h("pre", { class: "code" }, s.body ?? "")));
  };
  const problems = list.problems ?? [];
  fill(
    body,
    h("p", { class: "note" }, `Loaded from ${(list.dirs ?? []).join(", ") || "no folder"} (generation ${list.generation}); a change to a folder reloads them.`),
    list.data.length ? null : h("p", { class: "note" }, "No skill is installed: add a folder with a SKILL.md (docs/skills.md)."),
    table(
      ["name", "status", "tool", "approval", "triggers", ""],
      list.data.map((s) =>
        h(
          "tr",
          { dataset: { skill: s.name } },
          h("td", {}, s.name, h("br"), h("small", {}, s.description)),
          h("td", {}, h("span", { class: `badge ${s.available ? "active" : "queued"}` }, s.status), s.reason ? h("small", {}, " " + s.reason) : null),
          h("td", {}, s.tool ? "yes" : "no"),
          h("td", {}, s.approval ?? "never"),
          h("td", {}, (s.triggers ?? []).join(", ")),
          h("td", {}, h("button", { type: "button", onclick: () => show(s.name).catch((e) => fill(detail, alertBox(e.message))) }, "Read")),
        ),
      ),
    ),
    problems.length ? [h("h2", {}, "Problems"), table(["file", "line", "problem"], problems.map((p) => h("tr", { class: "problem" }, h("td", {}, p.file), h("td", {}, String(p.line || "")), h("td", {}, p.message))))] : null,
    detail,
  );
}

// --- channels (JSON), with threads and dead letters ---

async function channels(body, params) {
  const list = await api("/channels", { query: { limit: 200 } });
  const reload = () => channels(fill(body), params);
  const detail = h("div", { id: "channel-detail" });
  const show = async (c) => {
    const threads = await api(`/channels/${encodeURIComponent(c.name)}/threads`, { query: { limit: 100 } });
    fill(
      detail,
      h("h2", {}, `Channel ${c.name}`),
      h("p", {}, `outbox: ${c.outbox?.pending ?? 0} pending · ${c.outbox?.sent ?? 0} sent · ${c.outbox?.dead ?? 0} dead; journal: ${c.journal?.messages ?? 0} messages, ${c.journal?.dead ?? 0} dead`),
      h("h3", {}, "Threads"),
      threads.data.length
        ? table(["thread", "owner", "conversation"], threads.data.map((t) => h("tr", {}, h("td", {}, t.thread_key), h("td", {}, t.owner), h("td", {}, t.conversation_id ? h("a", { href: `#/chat/${encodeURIComponent(t.conversation_id)}` }, t.conversation_id.slice(0, 8)) : ""))))
        : h("p", { class: "note" }, "No threads."),
      h("h3", {}, "Dead letters"),
      (c.dead_letters ?? []).length
        ? table(["run", "part", "attempts", "last error", "text"], c.dead_letters.map((d) => h("tr", {}, h("td", {}, d.run_id ? h("a", { href: `#/runs/${encodeURIComponent(d.run_id)}` }, d.run_id.slice(0, 8)) : ""), h("td", {}, String(d.part)), h("td", {}, String(d.attempts)), h("td", {}, d.last_error), h("td", {}, d.text))))
        : h("p", { class: "note" }, "None."),
      c.declared ? h("p", { class: "note" }, "Declared in the config file: change it there.") : editor(c),
    );
    detail.scrollIntoView?.({ block: "nearest" });
  };
  const editor = (c) => {
    const view = c ? withoutKeys(c, ["outbox", "dead_letters", "journal", "declared", "token_set", "created_at", "updated_at"]) : { name: "", type: "webhook", agent: "", enabled: true };
    const json = textarea("channel", pretty(view), 10);
    return form(c ? `channel-${c.name}` : "channel-new", [field("Channel (JSON, as the API takes it)", json, "keys: docs/channels.md")], c ? "Save channel" : "Create channel", async () => {
      const value = parseJson(json.value, "channel");
      if (c) delete value.name;
      const answer = await api(c ? `/channels/${encodeURIComponent(c.name)}` : "/channels", { method: c ? "PATCH" : "POST", body: value });
      setTimeout(reload, 600);
      return answer;
    });
  };
  body.append(
    table(
      ["name", "type", "agent", "enabled", "outbox", ""],
      list.data.map((c) => {
        const open = h("button", { type: "button", "aria-label": `Open channel ${c.name}` }, "Open");
        open.addEventListener("click", () => show(c).catch((e) => fill(detail, alertBox(e.message))));
        return h(
          "tr",
          {},
          h("td", {}, c.name),
          h("td", {}, c.type),
          h("td", {}, c.agent ?? c.agent_id ?? ""),
          h("td", {}, String(c.enabled)),
          h("td", {}, `${c.outbox?.pending ?? 0} pending · ${c.outbox?.dead ?? 0} dead`),
          h("td", {}, open, c.declared ? null : deleteButton(`/channels/${encodeURIComponent(c.name)}`, c.name, reload)),
        );
      }),
    ),
    detail,
    h("h2", {}, "New channel"),
    editor(null),
  );
}

// --- users and tokens ---

async function users(body) {
  const [tokenList, userList] = await Promise.all([api("/tokens", { query: { limit: 200 } }), api("/users", { query: { limit: 200 } }).catch(() => null)]);
  const reload = () => users(fill(body));
  if (userList) {
    const name = input("name", "", { required: true });
    const display = input("display_name");
    const role = select("role", ["user", "admin"], "user");
    body.append(
      h("h2", {}, "Users"),
      table(["id", "name", "display name", "role", "created"], userList.data.map((u) => h("tr", {}, h("td", {}, String(u.id)), h("td", {}, u.name), h("td", {}, u.display_name), h("td", {}, u.role), h("td", {}, when(u.created_at))))),
      form("user-new", [field("Name", name), field("Display name", display), field("Role", role)], "Create user", async () => {
        const answer = await api("/users", { method: "POST", body: { name: name.value.trim(), display_name: display.value, role: role.value } });
        setTimeout(reload, 600);
        return answer;
      }),
    );
  }
  const tokenName = input("name", "", { required: true });
  const scope = select("scope", ["user", "agent", "admin"], "user");
  const agent = input("agent_id", "", { placeholder: "for scope agent: the agent's name or id" });
  const user = input("user_id", "", { placeholder: "admins: the user's id (default: you)", inputmode: "numeric" });
  body.append(
    h("h2", {}, "Tokens"),
    table(
      ["id", "name", "user", "scope", "created", "revoked", ""],
      tokenList.data.map((t) =>
        h(
          "tr",
          {},
          h("td", {}, String(t.id)),
          h("td", {}, t.name),
          h("td", {}, String(t.user_id)),
          h("td", {}, t.scope + (t.agent_id ? ` (${t.agent_id})` : "")),
          h("td", {}, when(t.created_at)),
          h("td", {}, t.revoked_at ? when(t.revoked_at) : ""),
          h("td", {}, t.revoked_at ? null : deleteButton(`/tokens/${t.id}`, t.name, reload, "Revoke")),
        ),
      ),
    ),
    form(
      "token-new",
      [field("Name", tokenName), field("Scope", scope), field("Agent", agent), userList ? field("User id", user) : null],
      "Create token",
      async () => {
        const value = { name: tokenName.value.trim(), scope: scope.value };
        if (agent.value.trim()) value.agent_id = /^\d+$/.test(agent.value.trim()) ? Number(agent.value.trim()) : agent.value.trim();
        if (user.value.trim()) value.user_id = Number(user.value.trim());
        return api("/tokens", { method: "POST", body: value });
      },
      (answer) =>
        h(
          "div",
          { role: "status" },
          h("p", {}, "The new token, shown this once (copy it now):"),
          h("pre", { class: "secret-once", id: "new-token" }, answer.token),
        ),
    ),
  );
}
