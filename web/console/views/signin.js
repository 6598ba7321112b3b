// Sign-in with a troupe token: checked against GET /api/v1/me, then kept in this tab's
// sessionStorage. The form never submits (no token in a URL or in a request body).

import { session } from "../api.js";
import { h, alertBox } from "../dom.js";

export function render(root, { message, signedIn }) {
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    placeholder: "trp_…",
    "aria-describedby": "token-help",
  });
  const status = h("div", { class: "status", "aria-live": "polite" }, message ? h("p", {}, message) : null);
  const button = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h(
    "form",
    { class: "signin card", "aria-labelledby": "signin-title", novalidate: true },
    h("h1", { id: "signin-title" }, "troupe console"),
    h("div", { class: "field" }, h("label", { for: "token" }, "Token"), input),
    h(
      "p",
      { id: "token-help", class: "hint" },
      "A troupe API token (trp_…). On first start troupe writes an admin token to <data-dir>/admin.token. ",
      "It stays in this tab only and is forgotten when you sign out or close the tab.",
    ),
    button,
    status,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (!token) {
      status.replaceChildren(alertBox("Enter a token."));
      input.focus();
      return;
    }
    button.disabled = true;
    status.replaceChildren(h("p", {}, "Checking…"));
    try {
      const res = await fetch("/api/v1/me", { headers: { Authorization: `Bearer ${token}` } });
      const body = await res.json().catch(() => null);
      if (!res.ok) {
        throw new Error(
          res.status === 401
            ? "This token is not valid (unknown or revoked)."
            : `Could not sign in: ${body?.error?.message ?? res.status + " " + res.statusText}`,
        );
      }
      session.token = token;
      input.value = "";
      signedIn(body);
    } catch (err) {
      const text = err.message;
      status.replaceChildren(alertBox(text));
      button.disabled = false;
      input.focus();
      input.select();
    }
  });
  root.append(h("main", { id: "main", class: "signin-page" }, form));
  input.focus();
}
