// The Bunko web console (docs/console.md): a small single-page application over the public
// HTTP API. Pages are functions of the URL fragment (#/db/NAME/query, …) that fetch what they
// show with the session cookie and build the DOM with `h` (text is always set as text, never
// parsed as HTML). No framework, no build step: this file is served as written.
"use strict";

// ---------- helpers ----------

/** Builds an element: h("a", {href: "#/"}, "text", child, …). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "style") el.setAttribute("style", v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const enc = encodeURIComponent;
const main = () => document.getElementById("main");

/** One API call: {status, body}; the body is JSON when the answer is. */
async function api(method, path, body, headers) {
  // no-store: a document's ETag is its winning rev, which stays when a losing leaf goes, so
  // a revalidated cached answer would still show the resolved conflict.
  const init = { method, credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json", ...(headers || {}) } };
  if (body !== undefined) {
    if (body instanceof Blob) init.body = body;
    else {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = text; }
  if (res.status === 401 && path !== "/_session") {
    // A 401 also means "not a server admin"; only a lost session goes back to the login.
    const who = await fetch("/_session", { credentials: "same-origin", cache: "no-store" }).then((r) => r.json()).catch(() => null);
    if (!who || !who.userCtx || !who.userCtx.name) location.reload();
  }
  return { status: res.status, ok: res.ok, body: json };
}

/** Like api, but throws the CouchDB error as a message. */
async function must(method, path, body, headers) {
  const r = await api(method, path, body, headers);
  if (!r.ok) throw new Error(`${r.status} ${r.body && r.body.error || ""}: ${r.body && r.body.reason || ""}`);
  return r.body;
}

function toast(text, isError) {
  const t = h("div", { class: "toast" + (isError ? " error" : "") }, text);
  document.getElementById("status").append(t);
  setTimeout(() => t.remove(), isError ? 8000 : 3500);
}

function bytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KB", "MB", "GB", "TB"];
  const i = Math.min(u.length - 1, Math.floor(Math.log(n) / Math.log(1024)));
  return `${(n / 1024 ** i).toFixed(i ? 1 : 0)} ${u[i]}`;
}

const pretty = (v) => JSON.stringify(v, null, 2);
const table = (head, rows, attrs) =>
  h("div", { class: "table-wrap" }, h("table", attrs || {},
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col", class: /^(Docs|Size|Bytes|Deleted|Share|Progress)/.test(c) ? "num" : null }, c)))),
    h("tbody", {}, rows)));

function bar(fraction, cls) {
  const pct = Math.max(0, Math.min(100, fraction * 100));
  return h("div", { class: "bar" + (cls ? " " + cls : ""), role: "img", "aria-label": `${pct.toFixed(0)}%` },
    h("span", { style: `width:${pct}%` }));
}

/** A textarea that checks its JSON as the user types; returns {el, value(), valid()}. */
function jsonEditor(id, initial, label) {
  const area = h("textarea", { id, class: "json", spellcheck: "false", "aria-label": label || "JSON" });
  area.value = typeof initial === "string" ? initial : pretty(initial);
  const msg = h("p", { class: "error", id: id + "-error", "aria-live": "polite" });
  const check = () => {
    try { JSON.parse(area.value); area.classList.remove("invalid"); msg.textContent = ""; return true; }
    catch (e) { area.classList.add("invalid"); msg.textContent = "Invalid JSON: " + e.message; return false; }
  };
  area.addEventListener("input", check);
  area.addEventListener("keydown", (e) => {
    // Tab indents inside the editor; Escape then Tab leaves it (keyboard users are not trapped).
    if (e.key === "Tab" && !e.shiftKey && !area.dataset.escaped) {
      e.preventDefault();
      area.setRangeText("  ", area.selectionStart, area.selectionEnd, "end");
    }
    area.dataset.escaped = e.key === "Escape" ? "1" : "";
  });
  return { el: h("div", {}, area, msg), area, valid: check, value: () => JSON.parse(area.value) };
}

/** A button that asks again inline before doing something destructive. */
function confirmButton(label, question, action, id) {
  const holder = h("span", {});
  const button = h("button", { type: "button", class: "danger", id, onclick: () => {
    const typed = h("input", { "aria-label": "Type yes to confirm", placeholder: "type yes", id: id && id + "-confirm-text" });
    const box = h("div", { class: "confirm", role: "alertdialog", "aria-label": question },
      h("p", {}, question), h("div", { class: "row" }, typed,
        h("button", { type: "button", class: "danger", id: id && id + "-confirm", onclick: async () => {
          if (typed.value.trim().toLowerCase() !== "yes") { typed.focus(); return; }
          try { await action(); } catch (e) { toast(e.message, true); }
        } }, "Confirm"),
        h("button", { type: "button", onclick: () => { box.remove(); button.focus(); } }, "Cancel")));
    holder.append(box);
    typed.focus();
  } }, label);
  holder.append(button);
  return holder;
}

// ---------- routing ----------

let cleanup = [];
function onLeave(fn) { cleanup.push(fn); }

function route() {
  cleanup.forEach((fn) => fn());
  cleanup = [];
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  document.querySelectorAll("[data-nav]").forEach((a) => a.removeAttribute("aria-current"));
  const m = main();
  m.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  let page;
  if (parts[0] === "server") page = serverPage();
  else if (parts[0] === "db" && parts[1]) page = dbPage(parts[1], parts[2] || "docs", parts.slice(3), params);
  else page = databasesPage();
  const nav = parts[0] === "server" ? "server" : "dbs";
  document.querySelector(`[data-nav="${nav}"]`).setAttribute("aria-current", "page");
  page.catch((e) => m.replaceChildren(h("h1", {}, "Error"), h("p", { class: "error" }, e.message)));
}

function render(title, ...content) {
  document.title = `${title} · Bunko console`;
  main().replaceChildren(...content);
}

// ---------- databases ----------

async function databasesPage() {
  const all = await api("GET", "/_all_dbs?limit=500");
  if (!all.ok) return openByName();
  const names = all.body;
  const infos = await Promise.all(names.map((n) => api("GET", "/" + enc(n)).then((r) => r.body)));
  const name = h("input", { id: "db-name", placeholder: "new database name", "aria-label": "Database name", required: true });
  const partitioned = h("input", { id: "db-partitioned", type: "checkbox" });
  const create = h("form", { class: "row", onsubmit: async (e) => {
    e.preventDefault();
    const q = partitioned.checked ? "?partitioned=true" : "";
    try {
      await must("PUT", "/" + enc(name.value.trim()) + q);
      toast(`Created ${name.value}`);
      location.hash = "#/db/" + enc(name.value.trim());
    } catch (err) { toast(err.message, true); }
  } }, name, h("label", { class: "row" }, partitioned, "partitioned"),
    h("button", { id: "db-create", type: "submit", class: "primary" }, "Create database"));
  const rows = infos.map((info, i) => {
    const n = names[i];
    if (!info || !info.db_name) return h("tr", {}, h("td", {}, n), h("td", { colspan: 5, class: "muted" }, "no access"));
    return h("tr", {},
      h("td", {}, h("a", { href: "#/db/" + enc(n) }, n)),
      h("td", { class: "num" }, info.doc_count),
      h("td", { class: "num" }, info.doc_del_count),
      h("td", { class: "num" }, bytes(info.sizes.file)),
      h("td", {}, info.props && info.props.partitioned ? h("span", { class: "badge info" }, "partitioned") : ""),
      h("td", {}, confirmButton("Delete", `Delete database ${n} and all its documents?`, async () => {
        await must("DELETE", "/" + enc(n));
        toast(`Deleted ${n}`);
        route();
      }, "delete-db-" + n)));
  });
  render("Databases", h("h1", {}, "Databases"),
    h("div", { class: "panel" }, h("h2", { style: "margin-top:0" }, "Create"), create),
    table(["Name", "Docs", "Deleted", "Size", "Kind", ""], rows, { id: "db-table" }));
}

/** For users who may not list databases (only server admins may): open one by name. */
function openByName() {
  const name = h("input", { id: "open-db-name", placeholder: "database name", "aria-label": "Database name", required: true });
  render("Databases", h("h1", {}, "Databases"),
    h("p", { class: "muted" }, "Only server admins may list every database. Open one you are a member of:"),
    h("form", { class: "row panel", onsubmit: (e) => {
      e.preventDefault();
      location.hash = "#/db/" + enc(name.value.trim());
    } }, name, h("button", { type: "submit", class: "primary" }, "Open")));
}

// ---------- one database ----------

const TABS = [["docs", "Documents"], ["query", "Query"], ["indexes", "Indexes & design docs"],
  ["partitions", "Partitions"], ["advisor", "Advisor"], ["security", "Security"]];

async function dbPage(db, tab, rest, params) {
  const info = await must("GET", "/" + enc(db));
  const partitioned = !!(info.props && info.props.partitioned);
  const tabs = h("nav", { class: "tabs", "aria-label": "Database" }, TABS
    .filter(([t]) => t !== "partitions" || partitioned)
    .map(([t, label]) => h("a", { href: `#/db/${enc(db)}/${t}`, "aria-current": t === tab || (tab === "doc" && t === "docs") ? "page" : null }, label)));
  const head = [h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Databases"), " / ", db,
    " · ", `${info.doc_count} docs · ${bytes(info.sizes.file)}`, partitioned ? " · partitioned" : ""), tabs];
  const ctx = { db, info, partitioned, head, params, base: "/" + enc(db) };
  const pages = { docs: docsPage, doc: () => docPage(ctx, rest[0]), new: () => docPage(ctx, null),
    query: queryPage, indexes: indexesPage, partitions: partitionsPage, advisor: advisorPage, security: securityPage };
  await (pages[tab] || docsPage)(ctx);
}

// ---------- documents ----------

async function docsPage(ctx) {
  const { db, base, params, partitioned } = ctx;
  const partition = params.get("partition") || "";
  const start = params.get("start");
  const limit = 20;
  const q = new URLSearchParams({ limit: limit + 1, include_docs: "true", conflicts: "true" });
  if (start) q.set("startkey", JSON.stringify(start));
  const path = partition ? `${base}/_partition/${enc(partition)}/_all_docs` : `${base}/_all_docs`;
  const res = await must("GET", `${path}?${q}`);
  const rows = res.rows.slice(0, limit);
  const next = res.rows.length > limit ? res.rows[limit].id : null;
  const link = (s) => {
    const p = new URLSearchParams();
    if (partition) p.set("partition", partition);
    if (s) p.set("start", s);
    return `#/db/${enc(db)}/docs?${p}`;
  };
  const partInput = h("input", { id: "partition-filter", value: partition, placeholder: "partition", "aria-label": "Partition" });
  const filter = partitioned ? h("form", { class: "row", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    if (partInput.value.trim()) p.set("partition", partInput.value.trim());
    location.hash = `#/db/${enc(db)}/docs?${p}`;
  } }, partInput, h("button", { type: "submit" }, "Show partition")) : null;
  const body = rows.map((r) => {
    const conflicts = (r.doc && r.doc._conflicts) || [];
    return h("tr", {},
      h("td", {}, h("a", { href: `#/db/${enc(db)}/doc/${enc(r.id)}` }, r.id)),
      h("td", { class: "mono" }, r.value.rev),
      h("td", {}, conflicts.length ? h("span", { class: "badge bad" }, `${conflicts.length} conflict${conflicts.length > 1 ? "s" : ""}`) : ""),
      h("td", { class: "mono hide-narrow preview" }, preview(r.doc)));
  });
  render(`${db} documents`, ...ctx.head,
    h("div", { class: "row", style: "justify-content:space-between;margin-bottom:.75rem" },
      h("a", { class: "button primary", id: "new-doc", href: `#/db/${enc(db)}/new` }, "New document"), filter),
    h("p", { class: "muted" }, partition ? `Partition ${partition}: ` : "", `${res.total_rows} documents`, start ? ` from ${start}` : ""),
    table(["Id", "Rev", "Conflicts", "Content"], body, { id: "docs-table" }),
    h("div", { class: "row", style: "margin-top:.75rem" },
      start ? h("a", { class: "button", href: link(null) }, "First page") : null,
      next ? h("a", { class: "button", id: "next-page", href: link(next) }, "Next page") : null));
}

/** The start of a document's body without `_id`, `_rev` and `_conflicts`. */
function preview(doc) {
  const { _id, _rev, _conflicts, ...rest } = doc || {};
  return JSON.stringify(rest).slice(0, 120);
}

async function docPage(ctx, id) {
  const { db, base } = ctx;
  const url = id === null ? null : docPath(base, id);
  const doc = url ? await must("GET", `${url}?conflicts=true&revs_info=true`) : { _id: "" };
  const editable = { ...doc };
  for (const k of ["_conflicts", "_revs_info", "_attachments"]) delete editable[k];
  if (id === null) delete editable._id;
  const editor = jsonEditor("doc-editor", id === null ? { type: "" } : editable, "Document JSON");
  const newId = id === null ? h("input", { id: "new-doc-id", placeholder: ctx.partitioned ? "partition:id (empty: generated)" : "id (empty: generated)", "aria-label": "Document id" }) : null;
  const save = h("button", { id: "doc-save", type: "button", class: "primary", onclick: async () => {
    if (!editor.valid()) return;
    const body = editor.value();
    if (doc._attachments) body._attachments = doc._attachments;
    try {
      let r;
      if (id === null) {
        const given = newId.value.trim();
        r = given ? await must("PUT", docPath(base, given), body) : await must("POST", base, body);
      } else {
        r = await must("PUT", url, body);
      }
      toast(`Saved ${r.id} at ${r.rev}`);
      location.hash = `#/db/${enc(db)}/doc/${enc(r.id)}`;
      if (id !== null) route();
    } catch (e) { toast(e.message, true); }
  } }, id === null ? "Create" : "Save");
  const parts = [...ctx.head, h("h1", {}, id === null ? "New document" : id)];
  if (id !== null) {
    parts.push(h("p", {}, "Current revision ", h("code", { id: "doc-rev" }, doc._rev)));
    parts.push(conflictsPanel(ctx, id, doc));
  }
  parts.push(h("div", { class: "panel" }, newId ? h("div", { class: "field" }, h("label", { for: "new-doc-id" }, "Id"), newId) : null,
    editor.el, h("div", { class: "row" }, save,
      id !== null ? confirmButton("Delete document", `Delete ${id}?`, async () => {
        await must("DELETE", `${url}?rev=${enc(doc._rev)}`);
        toast(`Deleted ${id}`);
        location.hash = `#/db/${enc(db)}/docs`;
      }, "doc-delete") : null)));
  if (id !== null) parts.push(attachmentsPanel(url, doc), historyPanel(url, doc));
  render(id === null ? "New document" : id, ...parts);
}

/** A document's path: `_design/` and `_local/` keep their slash (an encoded one redirects). */
function docPath(base, id) {
  const special = /^(_design|_local)\/(.+)$/.exec(id);
  return special ? `${base}/${special[1]}/${enc(special[2])}` : `${base}/${enc(id)}`;
}

function conflictsPanel(ctx, id, doc) {
  const losers = doc._conflicts || [];
  if (!losers.length) return h("p", { class: "muted", id: "conflicts" }, "No conflicts.");
  const url = docPath(ctx.base, id);
  const keep = async (rev) => {
    // The kept revision's body goes on the winning branch; every other leaf is deleted.
    const docs = losers.filter((r) => r !== rev).map((r) => ({ _id: id, _rev: r, _deleted: true }));
    if (rev !== doc._rev) {
      const body = await must("GET", `${url}?rev=${enc(rev)}`);
      docs.push({ ...body, _rev: doc._rev });
      docs.push({ _id: id, _rev: rev, _deleted: true });
    }
    const results = await must("POST", `${ctx.base}/_bulk_docs`, { docs });
    const failed = results.filter((r) => r.error);
    if (failed.length) throw new Error(failed.map((r) => r.reason || r.error).join("; "));
    toast(`Resolved: kept ${rev}`);
    route();
  };
  const rows = [doc._rev, ...losers].map((rev) => {
    const view = h("pre", { class: "json", hidden: true });
    return h("tr", {},
      h("td", { class: "mono" }, rev, rev === doc._rev ? h("span", { class: "badge good" }, " winner") : ""),
      h("td", {}, h("button", { type: "button", onclick: async () => {
        view.textContent = pretty(await must("GET", `${url}?rev=${enc(rev)}`));
        view.hidden = !view.hidden;
      } }, "Show"), view),
      h("td", {}, h("button", { type: "button", class: "keep-rev", "data-rev": rev, onclick: () => keep(rev).catch((e) => toast(e.message, true)) }, "Keep this one")));
  });
  return h("section", { class: "panel", id: "conflicts", "aria-labelledby": "conflicts-title" },
    h("h2", { id: "conflicts-title", style: "margin-top:0" }, h("span", { class: "badge bad" }, `${losers.length} conflict${losers.length > 1 ? "s" : ""}`), " Conflicting revisions"),
    h("p", { class: "muted" }, "Replication kept several leaves of this document. Keep one: its body becomes the current revision and the other leaves are deleted."),
    table(["Revision", "Body", ""], rows));
}

function attachmentsPanel(url, doc) {
  const atts = Object.entries(doc._attachments || {});
  const file = h("input", { type: "file", id: "att-file", "aria-label": "File to attach" });
  const upload = h("button", { type: "button", id: "att-upload", onclick: async () => {
    const f = file.files[0];
    if (!f) return toast("Choose a file first", true);
    try {
      await must("PUT", `${url}/${enc(f.name)}?rev=${enc(doc._rev)}`, f, { "Content-Type": f.type || "application/octet-stream" });
      toast(`Attached ${f.name}`);
      route();
    } catch (e) { toast(e.message, true); }
  } }, "Upload");
  return h("section", { class: "panel" }, h("h2", { style: "margin-top:0" }, "Attachments"),
    atts.length ? table(["Name", "Type", "Bytes"], atts.map(([name, a]) => h("tr", {},
      h("td", {}, h("a", { href: `${url}/${enc(name)}`, download: name }, name)),
      h("td", {}, a.content_type), h("td", { class: "num" }, a.length))), { id: "att-table" }) : h("p", { class: "muted" }, "None."),
    h("div", { class: "row", style: "margin-top:.5rem" }, file, upload));
}

function historyPanel(url, doc) {
  const infos = doc._revs_info || [];
  return h("section", { class: "panel" }, h("h2", { style: "margin-top:0" }, "Revision history"),
    h("ol", { id: "rev-history" }, infos.map((r) => {
      const view = h("pre", { class: "json", hidden: true });
      return h("li", {}, h("code", {}, r.rev), " ", h("span", { class: "badge" + (r.status === "available" ? " good" : "") }, r.status), " ",
        r.status === "available" ? h("button", { type: "button", onclick: async () => {
          view.textContent = pretty(await must("GET", `${url}?rev=${enc(r.rev)}`));
          view.hidden = !view.hidden;
        } }, "Show") : null, view);
    })));
}

// ---------- queries ----------

async function queryPage(ctx) {
  const { db, base, params, partitioned } = ctx;
  const partition = h("input", { id: "query-partition", value: params.get("partition") || "", placeholder: "partition (empty: global)", "aria-label": "Partition" });
  const editor = jsonEditor("mango", { selector: {}, limit: 25 }, "Mango query");
  editor.area.style.minHeight = "8rem";
  const out = h("div", { id: "query-out" });
  const where = () => partitioned && partition.value.trim() ? `${base}/_partition/${enc(partition.value.trim())}` : base;
  const run = async (explainOnly) => {
    if (!editor.valid()) return;
    const query = editor.value();
    try {
      const explain = await must("POST", `${where()}/_explain`, query);
      const result = explainOnly ? null : await must("POST", `${where()}/_find`, { ...query, execution_stats: true });
      out.replaceChildren(explainPicture(ctx, explain, result, query, !!(partitioned && partition.value.trim()), () => run(explainOnly)),
        result ? resultsView(result) : null);
    } catch (e) { out.replaceChildren(h("p", { class: "error" }, e.message)); }
  };
  render(`${db} query`, ...ctx.head,
    h("h1", {}, "Mango query"),
    h("div", { class: "panel" },
      partitioned ? h("div", { class: "field" }, h("label", { for: "query-partition" }, "Partition"), partition) : null,
      editor.el,
      h("div", { class: "row" },
        h("button", { id: "run-find", type: "button", class: "primary", onclick: () => run(false) }, "Run _find"),
        h("button", { id: "run-explain", type: "button", onclick: () => run(true) }, "Explain only"))),
    out, await viewsPanel(ctx), await searchPanel(ctx));
}

/** Draws `_explain` (and the run's execution_stats) as a picture. */
function explainPicture(ctx, ex, result, query, partitionQuery, rerun) {
  const idx = ex.index || {};
  const fields = ((idx.def && idx.def.fields) || []).map((f) => Object.keys(f)[0]);
  const fullScan = idx.type === "special";
  const m = ex.mrargs || {};
  const stats = result && result.execution_stats;
  const steps = h("div", { class: "plan", id: "explain-plan", role: "group", "aria-label": "Query plan" },
    h("div", { class: "step" }, h("div", { class: "title" }, "Selector"), h("pre", { class: "json" }, pretty(ex.selector))),
    h("span", { class: "arrow", "aria-hidden": "true" }, "→"),
    h("div", { class: "step " + (fullScan ? "scan" : "chosen") },
      h("div", { class: "title" }, fullScan ? "No usable index: full scan" : "Chosen index"),
      h("div", { class: "name explain-index" }, idx.name || "?"),
      h("div", { class: "muted" }, idx.type, idx.ddoc ? ` · ${idx.ddoc}` : "", idx.partitioned !== undefined ? (idx.partitioned ? " · partitioned" : " · global") : ""),
      h("div", {}, "fields: ", h("code", {}, fields.join(", ")))),
    h("span", { class: "arrow", "aria-hidden": "true" }, "→"),
    h("div", { class: "step" }, h("div", { class: "title" }, "Key range"),
      h("div", { class: "mono" }, "from ", JSON.stringify(m.start_key)), h("div", { class: "mono" }, "to ", JSON.stringify(m.end_key)),
      h("div", { class: "muted" }, `${(ex.scanned_ranges || []).length} range(s) scanned`, ex.covering ? " · covering" : "")),
    stats ? h("span", { class: "arrow", "aria-hidden": "true" }, "→") : null,
    stats ? h("div", { class: "step", id: "explain-stats" }, h("div", { class: "title" }, "Documents"),
      h("div", { class: "funnel" },
        h("span", {}, "keys examined"), bar(1), h("span", { class: "num" }, stats.total_keys_examined),
        h("span", {}, "docs examined"), bar(stats.total_keys_examined ? stats.total_docs_examined / Math.max(stats.total_keys_examined, stats.total_docs_examined) : 1), h("span", { class: "num" }, stats.total_docs_examined),
        h("span", {}, "returned"), bar(stats.total_docs_examined ? stats.results_returned / stats.total_docs_examined : 0), h("span", { class: "num" }, stats.results_returned)),
      h("div", { class: "muted" }, `${stats.execution_time_ms.toFixed(2)} ms`)) : null);
  const rejected = (ex.index_candidates || []).map((c) => h("li", {},
    h("code", {}, c.index.name), " ", c.analysis.usable ? h("span", { class: "badge" }, "usable, ranked lower") : h("span", { class: "badge bad" }, "rejected"), " ",
    (c.analysis.reasons || []).map((r) => h("span", { class: "badge warning" }, r.name.replace(/_/g, " "))), " ",
    h("span", { class: "muted" }, c.index.def ? c.index.def.fields.map((f) => Object.keys(f)[0]).join(", ") : "")));
  const wanted = [...new Set([...((ex.selector_hints || [])[0] || {}).indexable_fields || [],
    ...(Array.isArray(query.sort) ? query.sort.map((s) => typeof s === "string" ? s : Object.keys(s)[0]) : [])])];
  const create = fullScan && wanted.length ? h("div", { class: "row", style: "margin-top:.75rem" },
    h("span", {}, "The planner would use an index on ", h("code", {}, wanted.join(", ")), "."),
    h("button", { type: "button", class: "primary", id: "create-wanted-index", onclick: async () => {
      const def = { index: { fields: wanted }, type: "json" };
      if (ctx.partitioned) def.partitioned = partitionQuery;
      try {
        const r = await must("POST", `${ctx.base}/_index`, def);
        toast(`Index ${r.name} ${r.result}`);
        rerun();
      } catch (e) { toast(e.message, true); }
    } }, "Create this index")) : null;
  return h("section", { class: "panel", "aria-labelledby": "plan-title" }, h("h2", { id: "plan-title", style: "margin-top:0" }, "Plan"), steps,
    rejected.length ? h("div", { class: "rejected" }, h("h3", {}, "Other candidates"), h("ul", {}, rejected)) : null, create,
    h("details", {}, h("summary", {}, "Raw _explain"), h("pre", { class: "json" }, pretty(ex))));
}

function resultsView(result) {
  const docs = result.docs || [];
  const cols = [...new Set(docs.slice(0, 50).flatMap((d) => Object.keys(d)))].slice(0, 12);
  const cell = (v) => v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
  const tableView = table(cols, docs.map((d) => h("tr", {}, cols.map((c) => h("td", { class: c === "_id" || c === "_rev" ? "mono" : null }, cell(d[c]))))), { id: "results-table" });
  const jsonView = h("pre", { class: "json", hidden: true, id: "results-json" }, pretty(result));
  const toggle = h("button", { type: "button", "aria-pressed": "false", onclick: () => {
    jsonView.hidden = !jsonView.hidden; tableView.hidden = !jsonView.hidden;
    toggle.setAttribute("aria-pressed", String(!jsonView.hidden));
    toggle.textContent = jsonView.hidden ? "Show JSON" : "Show table";
  } }, "Show JSON");
  return h("section", { class: "panel" }, h("div", { class: "row", style: "justify-content:space-between" },
    h("h2", { style: "margin:0" }, `${docs.length} result${docs.length === 1 ? "" : "s"}`), toggle),
    result.warning ? h("p", { class: "badge warning" }, result.warning) : null, tableView, jsonView);
}

async function viewsPanel(ctx) {
  const ddocs = await must("GET", `${ctx.base}/_design_docs?include_docs=true`);
  // Mango index design documents (language "query") hold no runnable views.
  const views = ddocs.rows.filter((r) => r.doc && r.doc.language !== "query")
    .flatMap((r) => Object.keys(r.doc.views || {}).map((v) => [r.id.slice(8), v]));
  if (!views.length) return h("section", { class: "panel" }, h("h2", { style: "margin-top:0" }, "Views"), h("p", { class: "muted" }, "No views: add a design document under Indexes & design docs."));
  const select = h("select", { id: "view-select", "aria-label": "View" }, views.map(([d, v]) => h("option", { value: `${d}/${v}` }, `${d} / ${v}`)));
  const names = ["key", "startkey", "endkey", "limit", "skip", "group_level"];
  const inputs = Object.fromEntries(names.map((n) => [n, h("input", { id: "view-" + n, placeholder: n, "aria-label": n, size: 10 })]));
  const flags = Object.fromEntries(["reduce", "group", "include_docs", "descending"].map((n) => [n, h("input", { type: "checkbox", id: "view-" + n })]));
  flags.reduce.checked = true;
  const out = h("div", { id: "query-view-out" });
  const run = async () => {
    const [d, v] = select.value.split("/");
    const q = new URLSearchParams();
    for (const n of names) if (inputs[n].value.trim()) q.set(n, inputs[n].value.trim());
    for (const [n, box] of Object.entries(flags)) q.set(n, box.checked);
    const prefix = ctx.partitioned && ctx.params.get("partition") ? `${ctx.base}/_partition/${enc(ctx.params.get("partition"))}` : ctx.base;
    try {
      const r = await must("GET", `${prefix}/_design/${enc(d)}/_view/${enc(v)}?${q}`);
      out.replaceChildren(table(["Key", "Value", "Id"], (r.rows || []).map((row) => h("tr", {},
        h("td", { class: "mono" }, JSON.stringify(row.key)), h("td", { class: "mono" }, JSON.stringify(row.value)), h("td", {}, row.id || "")))));
    } catch (e) { out.replaceChildren(h("p", { class: "error" }, e.message)); }
  };
  return h("section", { class: "panel" }, h("h2", { style: "margin-top:0" }, "Views"),
    h("div", { class: "row" }, select, Object.values(inputs),
      Object.entries(flags).map(([n, box]) => h("label", { class: "row" }, box, n)),
      h("button", { type: "button", class: "primary", id: "run-view", onclick: run }, "Run view")), out);
}

/** Cloudant Search (`indexes`) and Geo (`st_indexes`) indexes of the design documents. */
async function searchPanel(ctx) {
  const ddocs = await must("GET", `${ctx.base}/_design_docs?include_docs=true`);
  const found = ddocs.rows.filter((r) => r.doc).flatMap((r) => [
    ...Object.keys(r.doc.indexes || {}).map((i) => ["_search", r.id.slice(8), i]),
    ...Object.keys(r.doc.st_indexes || {}).map((i) => ["_geo", r.id.slice(8), i])]);
  const title = h("h2", { style: "margin-top:0" }, "Search and geo");
  if (!found.length) return h("section", { class: "panel" }, title, h("p", { class: "muted" }, "No search or geo indexes: add `indexes` or `st_indexes` to a design document."));
  const select = h("select", { id: "search-select", "aria-label": "Search or geo index" },
    found.map(([kind, d, i]) => h("option", { value: `${kind}/${d}/${i}` }, `${kind === "_geo" ? "geo" : "search"}: ${d} / ${i}`)));
  const input = h("input", { id: "search-query", size: 40, "aria-label": "Query",
    placeholder: "search: q, e.g. city:tokyo — geo: parameters, e.g. lat=35.68&lon=139.76&radius=1000" });
  const out = h("div", { id: "search-out" });
  const run = async () => {
    const [kind, d, i] = select.value.split("/");
    const text = input.value.trim();
    const q = kind === "_geo" ? new URLSearchParams(text) : new URLSearchParams({ q: text || "*:*" });
    if (!q.has("limit")) q.set("limit", "25");
    const prefix = ctx.partitioned && ctx.params.get("partition") && kind === "_search"
      ? `${ctx.base}/_partition/${enc(ctx.params.get("partition"))}` : ctx.base;
    try {
      const r = await must("GET", `${prefix}/_design/${enc(d)}/${kind}/${enc(i)}?${q}`);
      const rows = r.rows || r.features || [];
      const shown = (row) => JSON.stringify(row.fields || row.geometry || row.order || "");
      out.replaceChildren(h("p", {}, r.total_rows !== undefined ? `${r.total_rows} matches` : `${rows.length} rows`),
        table(["Id", "Fields / geometry"], rows.map((row) => h("tr", {},
          h("td", { class: "mono" }, row.id || ""), h("td", { class: "mono" }, shown(row))))));
    } catch (e) { out.replaceChildren(h("p", { class: "error" }, e.message)); }
  };
  return h("section", { class: "panel" }, title,
    h("div", { class: "row" }, select, input,
      h("button", { type: "button", class: "primary", id: "run-search", onclick: run }, "Run")), out);
}

// ---------- indexes and design documents ----------

async function indexesPage(ctx) {
  const { db, base, partitioned } = ctx;
  const [idx, ddocs, tasks] = await Promise.all([must("GET", `${base}/_index`),
    must("GET", `${base}/_design_docs?include_docs=true`), api("GET", "/_active_tasks")]);
  const building = (tasks.ok ? tasks.body : []).filter((t) => t.database === db);
  const fields = h("input", { id: "index-fields", placeholder: "fields, comma separated", "aria-label": "Index fields" });
  const name = h("input", { id: "index-name", placeholder: "name (optional)", "aria-label": "Index name" });
  const part = h("input", { type: "checkbox", id: "index-partitioned", checked: partitioned });
  const create = h("form", { class: "row", onsubmit: async (e) => {
    e.preventDefault();
    const def = { index: { fields: fields.value.split(",").map((f) => f.trim()).filter(Boolean) }, type: "json" };
    if (name.value.trim()) def.name = name.value.trim();
    if (partitioned) def.partitioned = part.checked;
    try { const r = await must("POST", `${base}/_index`, def); toast(`Index ${r.name} ${r.result}`); route(); }
    catch (err) { toast(err.message, true); }
  } }, fields, name, partitioned ? h("label", { class: "row" }, part, "partitioned") : null,
    h("button", { type: "submit", class: "primary", id: "index-create" }, "Create index"));
  const idxRows = idx.indexes.map((i) => h("tr", {},
    h("td", {}, i.name), h("td", {}, i.type), h("td", { class: "mono" }, (i.def.fields || []).map((f) => Object.keys(f)[0]).join(", ")),
    h("td", {}, i.partitioned === undefined ? "" : i.partitioned ? "partitioned" : "global"),
    h("td", {}, i.ddoc ? confirmButton("Delete", `Delete index ${i.name}?`, async () => {
      await must("DELETE", `${base}/_index/${enc(i.ddoc.slice(8))}/json/${enc(i.name)}`);
      toast(`Deleted ${i.name}`); route();
    }) : "")));
  const ddocRows = ddocs.rows.map((r) => h("tr", {},
    h("td", {}, h("a", { href: `#/db/${enc(db)}/doc/${enc(r.id)}` }, r.id)),
    h("td", {}, Object.keys((r.doc && r.doc.views) || {}).join(", ") || (r.doc && r.doc.language === "query" ? "(Mango index)" : "")),
    h("td", {}, confirmButton("Delete", `Delete ${r.id}?`, async () => {
      await must("DELETE", `${docPath(base, r.id)}?rev=${enc(r.value.rev)}`);
      toast(`Deleted ${r.id}`); route();
    }))));
  const ddocEditor = jsonEditor("ddoc-editor", { _id: "_design/example", views: { by_type: { map: "function (doc) { if (doc.type) emit(doc.type, 1); }", reduce: "_count" } } }, "Design document JSON");
  const saveDdoc = h("button", { type: "button", class: "primary", id: "ddoc-save", onclick: async () => {
    if (!ddocEditor.valid()) return;
    const body = ddocEditor.value();
    try { await must("PUT", docPath(base, String(body._id)), body); toast(`Saved ${body._id}`); route(); }
    catch (e) { toast(e.message, true); }
  } }, "Save design document");
  const buildBox = h("div", { class: "panel", id: "index-builds", hidden: !building.length },
    h("h2", { style: "margin-top:0" }, "Building"), tasksTable(building));
  if (building.length) {
    // Follow the builds; once none is left, show the finished indexes.
    const timer = setInterval(async () => {
      const now = await api("GET", "/_active_tasks");
      const mine = (now.ok ? now.body : []).filter((t) => t.database === db);
      if (!mine.length) { clearInterval(timer); route(); return; }
      buildBox.replaceChildren(h("h2", { style: "margin-top:0" }, "Building"), tasksTable(mine));
    }, 2000);
    onLeave(() => clearInterval(timer));
  }
  render(`${db} indexes`, ...ctx.head,
    h("h1", {}, "Indexes"),
    buildBox,
    h("div", { class: "panel" }, create), table(["Name", "Type", "Fields", "Scope", ""], idxRows, { id: "index-table" }),
    h("h2", {}, "Design documents"), table(["Id", "Views", ""], ddocRows, { id: "ddoc-table" }),
    h("div", { class: "panel", style: "margin-top:1rem" }, h("h3", { style: "margin-top:0" }, "New design document"), ddocEditor.el, saveDdoc));
}

function tasksTable(tasks) {
  return table(["Type", "Database", "What", "Progress", ""], tasks.map((t) => h("tr", {},
    h("td", {}, t.type), h("td", {}, t.database || t.source || ""), h("td", { class: "mono" }, t.index || t.design_document || t.pid || ""),
    h("td", { style: "min-width:10rem" }, bar((t.progress || 0) / 100)),
    h("td", { class: "num" }, `${t.progress || 0}% (${t.changes_done || 0}/${t.total_changes || 0})`))), { class: "tasks" });
}

// ---------- partitions ----------

async function partitionsPage(ctx) {
  const { db } = ctx;
  const res = await must("GET", `${ctx.base}/_partitions`);
  const parts = res.partitions.filter((p) => p.doc_count > 0).sort((a, b) => b.doc_count - a.doc_count);
  const total = parts.reduce((s, p) => s + p.doc_count, 0) || 1;
  const totalBytes = parts.reduce((s, p) => s + p.sizes.external, 0) || 1;
  const top = parts.slice(0, 25);
  const max = top.length ? top[0].doc_count : 1;
  const share = top.length ? top[0].doc_count / total : 0;
  const even = parts.length ? 1 / parts.length : 0;
  const chart = h("div", { class: "chart", id: "partition-chart", role: "list", "aria-label": "Documents per partition" },
    top.map((p) => [
      h("a", { href: `#/db/${enc(db)}/docs?partition=${enc(p.partition)}`, role: "listitem" }, p.partition),
      bar(p.doc_count / max, p.doc_count / total > Math.max(0.5, 3 * even) ? "hot" : ""),
      h("span", { class: "num" }, `${p.doc_count} docs · ${bytes(p.sizes.external)}`)]));
  render(`${db} partitions`, ...ctx.head, h("h1", {}, "Partitions"),
    h("div", { class: "cards" },
      h("div", { class: "card" }, h("div", { class: "muted" }, "Partitions"), h("div", { class: "big" }, parts.length, res.truncated ? "+" : "")),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Documents"), h("div", { class: "big" }, total)),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Largest partition's share"), h("div", { class: "big", id: "largest-share" }, `${(share * 100).toFixed(0)}%`),
        h("div", { class: "muted" }, parts.length ? `even would be ${(even * 100).toFixed(1)}%` : "")),
      h("div", { class: "card" }, h("div", { class: "muted" }, "Data"), h("div", { class: "big" }, bytes(totalBytes)))),
    h("section", { class: "panel", style: "margin-top:1rem" }, h("h2", { style: "margin-top:0" }, `Documents per partition${parts.length > top.length ? ` (largest ${top.length})` : ""}`),
      parts.length ? chart : h("p", { class: "muted" }, "No documents yet.")),
    h("section", { class: "panel" }, h("h2", { style: "margin-top:0" }, "Largest partitions"),
      table(["Partition", "Docs", "Bytes", "Share", ""], parts.slice(0, 10).map((p) => h("tr", {},
        h("td", {}, p.partition), h("td", { class: "num" }, p.doc_count), h("td", { class: "num" }, bytes(p.sizes.external)),
        h("td", { class: "num" }, `${(p.doc_count / total * 100).toFixed(1)}%`),
        h("td", {}, h("a", { href: `#/db/${enc(db)}/docs?partition=${enc(p.partition)}` }, "documents"), " · ",
          h("a", { href: `#/db/${enc(db)}/query?partition=${enc(p.partition)}` }, "query")))))));
}

// ---------- advisor ----------

async function advisorPage(ctx) {
  const r = await api("GET", `${ctx.base}/_advise`);
  if (!r.ok) return render("Advisor", ...ctx.head, h("h1", {}, "Advisor"), h("p", { class: "error" }, `${r.status}: ${r.body && r.body.reason}`));
  const a = r.body;
  const findings = a.findings.map((f) => h("article", { class: `panel finding ${f.severity}` },
    h("div", { class: "row" }, h("span", { class: `badge ${f.severity}` }, f.severity), h("code", {}, f.rule)),
    h("h2", { style: "margin:.4rem 0" }, f.summary),
    h("blockquote", {}, f.guide.rule, h("span", { class: "muted" }, ` — ${f.guide.source}`)),
    h("h3", {}, "Evidence"), evidence(f.evidence),
    h("h3", {}, "Suggestion"), h("p", { class: "suggestion" }, f.suggestion)));
  render(`${ctx.db} advisor`, ...ctx.head, h("h1", {}, "Advisor"),
    h("p", { class: "muted" }, `Sampled ${a.sample.size} of ${a.sample.doc_count} documents in ${a.sample.elapsed_ms} ms; ${a.observed.queries} queries observed. Checked ${a.rules_checked.length} rules.`),
    h("div", { id: "advisor" }, findings.length ? findings : h("p", { class: "panel ok" }, "No findings: the data follows every rule checked.")),
    h("details", {}, h("summary", {}, "Rules checked"), h("p", { class: "mono" }, a.rules_checked.join(", "))));
}

/** Evidence as a definition list; nested values as compact JSON. */
function evidence(v) {
  if (!v || typeof v !== "object" || Array.isArray(v)) return h("pre", { class: "json" }, pretty(v));
  return h("dl", { class: "evidence" }, Object.entries(v).map(([k, x]) => [h("dt", {}, k.replace(/_/g, " ")),
    h("dd", { class: typeof x === "object" ? "mono" : null }, typeof x === "object" ? JSON.stringify(x) : String(x))]));
}

// ---------- security ----------

async function securityPage(ctx) {
  const sec = await must("GET", `${ctx.base}/_security`);
  const fields = {};
  const group = (kind) => h("fieldset", { class: "panel" }, h("legend", {}, kind),
    ["names", "roles"].map((what) => {
      const input = h("input", { id: `sec-${kind}-${what}`, value: ((sec[kind] || {})[what] || []).join(", "), "aria-label": `${kind} ${what}`, size: 40 });
      fields[`${kind}.${what}`] = input;
      return h("div", { class: "field" }, h("label", { for: input.id }, what), input);
    }));
  const list = (s) => s.split(",").map((x) => x.trim()).filter(Boolean);
  render(`${ctx.db} security`, ...ctx.head, h("h1", {}, "Security"),
    h("p", { class: "muted" }, "Members may read and write documents; admins also change design documents and these settings. With no member names or roles, only server admins may use the database (CouchDB 3)."),
    h("div", { class: "grid2" }, group("members"), group("admins")),
    h("button", { type: "button", class: "primary", id: "sec-save", onclick: async () => {
      const body = { ...sec };
      for (const kind of ["members", "admins"]) body[kind] = { names: list(fields[`${kind}.names`].value), roles: list(fields[`${kind}.roles`].value) };
      try { await must("PUT", `${ctx.base}/_security`, body); toast("Security saved"); } catch (e) { toast(e.message, true); }
    } }, "Save"));
}

// ---------- server ----------

async function serverPage() {
  const [tasks, jobs] = await Promise.all([api("GET", "/_active_tasks"), api("GET", "/_scheduler/jobs")]);
  const cards = {
    rps: h("div", { class: "big", id: "metric-rps" }, "…"), latency: h("div", { class: "big", id: "metric-latency" }, "…"),
    writes: h("div", { class: "big", id: "metric-writes" }, "…"), storage: h("div", { class: "big", id: "metric-storage" }, "…"),
  };
  const sparks = Object.fromEntries(Object.keys(cards).map((k) => [k, spark()]));
  const card = (k, label) => h("div", { class: "card" }, h("div", { class: "muted" }, label), cards[k], sparks[k].el);
  const jobsPanel = jobs.ok
    ? table(["Id", "Source", "Target", "State", "Docs written"], (jobs.body.jobs || []).map((j) => h("tr", {},
      h("td", { class: "mono" }, j.id || j.doc_id || ""), h("td", {}, j.source || ""), h("td", {}, j.target || ""),
      h("td", {}, (j.history && j.history[0] && j.history[0].type) || j.state || ""), h("td", { class: "num" }, (j.info && j.info.docs_written) || 0))))
    : h("p", { class: "muted" }, jobs.status === 404 ? "This server has no replication scheduler." : `Not available (${jobs.status}).`);
  const taskList = tasks.ok ? tasks.body : [];
  const tasksBox = h("div", { id: "active-tasks" }, taskList.length ? tasksTable(taskList) : h("p", { class: "muted" }, "No active tasks."));
  render("Server", h("h1", {}, "Server"),
    h("section", {}, h("h2", {}, "Live metrics"), h("div", { class: "cards", id: "metrics" },
      card("rps", "Requests / s"), card("latency", "Mean latency (ms)"), card("writes", "Writes / s"), card("storage", "Stored data"))),
    h("section", {}, h("h2", {}, "Active tasks"), tasksBox),
    h("section", {}, h("h2", {}, "Replication jobs"), jobsPanel));
  let last = null;
  const tick = async () => {
    const r = await api("GET", "/_node/_local/_stats");
    if (!r.ok) { cards.rps.textContent = "n/a"; return; }
    const s = r.body;
    const now = { t: performance.now(), req: s.httpd.requests.value, n: s.couchdb.request_time.value.n,
      sum: s.couchdb.request_time.value.arithmetic_mean * s.couchdb.request_time.value.n, writes: s.couchdb.database_writes.value };
    cards.storage.textContent = bytes(s.bunko ? s.bunko.storage_bytes.value : 0);
    sparks.storage.push(s.bunko ? s.bunko.storage_bytes.value : 0);
    if (last) {
      const dt = (now.t - last.t) / 1000;
      const rps = (now.req - last.req) / dt, wps = (now.writes - last.writes) / dt;
      const lat = now.n > last.n ? (now.sum - last.sum) / (now.n - last.n) : 0;
      cards.rps.textContent = rps.toFixed(1); sparks.rps.push(rps);
      cards.writes.textContent = wps.toFixed(1); sparks.writes.push(wps);
      cards.latency.textContent = lat.toFixed(2); sparks.latency.push(lat);
    }
    last = now;
    const t = await api("GET", "/_active_tasks");
    if (t.ok) tasksBox.replaceChildren(t.body.length ? tasksTable(t.body) : h("p", { class: "muted" }, "No active tasks."));
  };
  await tick();
  const timer = setInterval(() => tick().catch(() => {}), 2000);
  onLeave(() => clearInterval(timer));
}

/** A small line chart of the last 60 values. */
function spark() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark"); svg.setAttribute("viewBox", "0 0 120 40"); svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("aria-hidden", "true");
  const line = document.createElementNS(ns, "polyline");
  svg.append(line);
  const values = [];
  return { el: svg, push(v) {
    values.push(v); if (values.length > 60) values.shift();
    const max = Math.max(...values, 1e-9);
    const shown = values.length === 1 ? [values[0], values[0]] : values;
    const step = 120 / (shown.length - 1);
    line.setAttribute("points", shown.map((x, i) => `${i * step},${38 - (x / max) * 36}`).join(" "));
  } };
}

// ---------- start ----------

document.getElementById("logout").addEventListener("click", async () => {
  await api("DELETE", "/_session");
  location.hash = "";
  location.reload();
});
api("GET", "/_session").then((r) => {
  const user = r.body && r.body.userCtx;
  document.getElementById("whoami").textContent = user && user.name ? user.name : "";
});
window.addEventListener("hashchange", () => { route(); main().focus({ preventScroll: true }); });
route();
