// CSV (RFC 4180: quoted fields, doubled quotes, CRLF or LF) read into rows, and a preview
// table of its first rows.

import { h } from "./dom.js";

export function parseCsv(text, maxRows = Infinity) {
  const rows = [];
  let row = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
    } else if (c === '"' && field === "") {
      quoted = true;
    } else if (c === ",") {
      row.push(field);
      field = "";
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
      if (rows.length >= maxRows) return rows;
    } else {
      field += c;
    }
  }
  if (field !== "" || row.length) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

/// A table of the first `maxRows` data rows, the first row as its header.
export function csvPreview(text, maxRows, caption) {
  const rows = parseCsv(text, maxRows + 1);
  if (!rows.length) return h("p", { class: "note" }, "(empty)");
  const [head, ...body] = rows;
  const total = text.split(/\r?\n/).filter((l) => l !== "").length - 1;
  return h(
    "table",
    { class: "csv-preview" },
    h("caption", { class: "sr-only" }, caption),
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, body.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))),
    total > body.length ? h("tfoot", {}, h("tr", {}, h("td", { colspan: head.length }, `${total - body.length} more rows`))) : null,
  );
}
