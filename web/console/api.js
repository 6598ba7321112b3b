// The console's only door to troupe: /api/v1 with the signed-in token as a bearer header.
// The token lives in sessionStorage (this tab, until it closes or signs out) and is never
// put in a URL: downloads use the API's signed, expiring links.

const TOKEN_KEY = "troupe.token";

export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  set token(value) {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
  /// Who the token belongs to (GET /api/v1/me), kept for the tab's life.
  me: null,
};

/// An answer with an error status: `status`, `code` and the API's `message`.
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/// Requests started before the page that uses them has loaded (app.js starts the
/// conversation list while chat.js is still on its way): `prefetch(key, f)` runs `f` now,
/// `prefetched(key)` hands its promise over once.
const early = new Map();
export function prefetch(key, f) {
  const started = f();
  started.catch(() => {}); // whoever takes it sees the error
  early.set(key, started);
}
export function prefetched(key) {
  const found = early.get(key);
  early.delete(key);
  return found;
}

/// Called when a request answers 401: the token was revoked or is wrong.
let onUnauthenticated = () => {};
export function whenUnauthenticated(f) {
  onUnauthenticated = f;
}

function headers(extra = {}) {
  const h = { ...extra };
  if (session.token) h.Authorization = `Bearer ${session.token}`;
  return h;
}

async function fail(res) {
  let body = null;
  let code = "http_" + res.status;
  let message = `${res.status} ${res.statusText}`;
  try {
    body = await res.json();
    if (body?.error) {
      code = body.error.code ?? code;
      message = body.error.message ?? message;
    }
  } catch {
    // Not JSON: the status says it all.
  }
  if (res.status === 401) onUnauthenticated(message);
  if (res.status === 429) {
    const wait = res.headers.get("Retry-After");
    if (wait) message += ` (retry after ${wait} s)`;
  }
  throw new ApiError(res.status, code, message, body);
}

/// A JSON request: `api("/conversations")`, `api("/agents", {method: "POST", body: {...}})`.
/// Resolves with the parsed answer (null for 204); rejects with an ApiError.
export async function api(path, { method = "GET", body, signal, query } = {}) {
  let url = path.startsWith("/") && !path.startsWith("/api/") && !path.startsWith("/metrics") ? "/api/v1" + path : path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
    const s = q.toString();
    if (s) url += (url.includes("?") ? "&" : "?") + s;
  }
  const init = { method, headers: headers(), signal };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(url, init);
  if (!res.ok) await fail(res);
  if (res.status === 204) return null;
  const type = res.headers.get("Content-Type") ?? "";
  return type.includes("json") ? res.json() : res.text();
}

/// Uploads one file (multipart, part `file`); resolves with the file record.
export async function upload(file, signal) {
  const form = new FormData();
  form.append("file", file, file.name);
  const res = await fetch("/api/v1/files", { method: "POST", headers: headers(), body: form, signal });
  if (!res.ok) await fail(res);
  return res.json();
}

/// Follows a run's events (GET /api/v1/runs/{id}/events, Server-Sent Events read with
/// fetch so the token goes in a header): calls `onEvent({event, id, data})` for each, in
/// order, and resumes with Last-Event-ID when the connection drops, until `[DONE]`.
/// Resolves when the run's stream is over; `signal` stops following (never the run).
export async function followRun(runId, onEvent, { signal, after = 0 } = {}) {
  let last = after;
  for (let attempt = 0; ; attempt++) {
    const h = headers({ Accept: "text/event-stream" });
    if (last > 0) h["Last-Event-ID"] = String(last);
    let res;
    try {
      res = await fetch(`/api/v1/runs/${encodeURIComponent(runId)}/events`, { headers: h, signal });
    } catch (e) {
      if (signal?.aborted) return;
      if (attempt >= 5) throw e;
      await pause(200 * (attempt + 1), signal);
      continue;
    }
    if (!res.ok) await fail(res);
    const done = await readEvents(res.body, (e) => {
      if (e.id) last = Number(e.id);
      onEvent(e);
    });
    if (done || signal?.aborted) return;
    // The stream ended before [DONE] (the server dropped a slow reader): resume.
    await pause(100, signal);
  }
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/// Reads an SSE body; true when it ended with `[DONE]`.
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = { event: "", id: "", data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += value;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        let line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (line === "") {
          if (event.data.length) {
            const data = event.data.join("\n");
            if (data === "[DONE]") return true;
            let parsed = data;
            try {
              parsed = JSON.parse(data);
            } catch {
              // Not JSON: handed over as text.
            }
            onEvent({ event: event.event || "message", id: event.id, data: parsed });
          }
          event = { event: "", id: "", data: [] };
        } else if (line.startsWith(":")) {
          // A comment (ping).
        } else {
          const colon = line.indexOf(":");
          const name = colon < 0 ? line : line.slice(0, colon);
          let v = colon < 0 ? "" : line.slice(colon + 1);
          if (v.startsWith(" ")) v = v.slice(1);
          if (name === "data") event.data.push(v);
          else if (name === "event") event.event = v;
          else if (name === "id") event.id = v;
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") return false;
    throw e;
  } finally {
    reader.releaseLock?.();
  }
}
