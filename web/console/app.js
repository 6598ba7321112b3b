// The console's shell: sign-in gate, navigation and the hash router (#/chat, #/runs/…).
// Each page is a module under views/ exporting `render(main, params) -> cleanup?`; pages
// load on first visit, so the first paint needs only this file, api.js and dom.js.

import { api, session, whenUnauthenticated, prefetch } from "./api.js";
import { h, fill } from "./dom.js";

const app = document.getElementById("app");

const pages = {
  chat: { label: "Chat", load: () => import("./views/chat.js") },
  runs: { label: "Runs", load: () => import("./views/runs.js") },
  overview: { label: "Overview", load: () => import("./views/overview.js") },
  memory: { label: "Memory", load: () => import("./views/memory.js") },
  approvals: { label: "Approvals", load: () => import("./views/approvals.js") },
  settings: { label: "Settings", load: () => import("./views/settings.js") },
};

let cleanup = null;
let main = null;
let nav = null;

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const name = pages[parts[0]] ? parts[0] : "chat";
  return { name, params: parts.slice(1) };
}

// Each route() takes a number; one that a later route() overtook while its page's module
// loaded renders nothing (two renders of one page would both follow its streams).
let routing = 0;

async function route() {
  const mine = ++routing;
  if (!session.token) {
    return showSignIn();
  }
  if (!main) buildShell();
  const { name, params } = parseHash();
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.page === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (cleanup) {
    try {
      cleanup();
    } catch {
      // A page's cleanup failing must not stop the next page.
    }
    cleanup = null;
  }
  document.title = `${pages[name].label} · troupe`;
  main.dataset.page = name;
  const module = await pages[name].load();
  // The hash may have changed, or another route() started, while the module loaded.
  if (mine !== routing || parseHash().name !== name) return;
  fill(main);
  const done = (await module.render(main, params)) ?? null;
  if (mine !== routing) {
    done?.(); // overtaken while it rendered: the newer page is (or will be) the one shown
    return;
  }
  cleanup = done;
}

function buildShell() {
  nav = h(
    "nav",
    { class: "top", "aria-label": "Console" },
    h("a", { class: "brand", href: "#/chat" }, "troupe"),
    h(
      "ul",
      {},
      Object.entries(pages).map(([key, p]) => h("li", {}, h("a", { href: `#/${key}`, dataset: { page: key } }, p.label))),
    ),
    h(
      "div",
      { class: "who" },
      h("span", { class: "user", id: "who" }, session.me ? session.me.user.name : ""),
      h("button", { type: "button", class: "quiet", id: "sign-out", onclick: signOut }, "Sign out"),
    ),
  );
  main = h("main", { id: "main", tabindex: "-1" });
  fill(app, h("a", { class: "skip", href: "#main", onclick: skipToMain }, "Skip to content"), h("header", {}, nav), main);
  if (!session.me) {
    api("/me")
      .then((me) => {
        session.me = me;
        const who = document.getElementById("who");
        if (who) who.textContent = `${me.user.name} (${me.scope})`;
      })
      .catch(() => {});
  }
}

function skipToMain(e) {
  e.preventDefault();
  main?.focus();
}

async function showSignIn(message) {
  ++routing; // a route() under way renders nothing now
  if (cleanup) {
    try {
      cleanup();
    } catch {
      // ignore
    }
    cleanup = null;
  }
  main = null;
  nav = null;
  document.title = "Sign in · troupe";
  const module = await import("./views/signin.js");
  fill(app);
  module.render(app, {
    message,
    signedIn: (me) => {
      session.me = me;
      route();
    },
  });
}

function signOut() {
  session.token = null;
  session.me = null;
  history.replaceState(null, "", location.pathname);
  showSignIn("Signed out.");
}

whenUnauthenticated((message) => {
  if (!session.token) return;
  session.token = null;
  session.me = null;
  showSignIn(`Signed out: ${message}`);
});

window.addEventListener("hashchange", route);
// "/" focuses the page's search box (when not typing somewhere).
window.addEventListener("keydown", (e) => {
  if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement || t?.isContentEditable) return;
  const search = document.querySelector("[data-search]");
  if (search) {
    e.preventDefault();
    search.focus();
  }
});

// The chat page's list is what the first paint shows: asked for now, while its module loads.
if (session.token && parseHash().name === "chat") {
  prefetch("conversations", () => api("/conversations", { query: { limit: 50, offset: 0 } }));
}
route();
