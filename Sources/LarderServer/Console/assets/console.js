// The Larder console: browse, upload, preview, edit metadata, share, rename, delete, store counts; all through api.js.
import * as api from "./api.js";

const $ = (id) => document.getElementById(id);
// An element: `dataset` and ARIA (`role`, `ariaLabel` → aria-label) become attributes, the rest properties.
function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "role" || k.startsWith("aria")) e.setAttribute(k === "role" ? k : `aria-${k.slice(4).toLowerCase()}`, v);
    else e[k] = v;
  }
  e.append(...children);
  return e;
}
const state = { bucket: "", prefix: "", items: [], prefixes: [], next: null, loading: false, current: null, view: "list", selected: new Set() };
// "1 folder", "2 folders".
const count = (n, word) => `${n} ${word}${Number(n) === 1 ? "" : "s"}`;
const formatSize = (n) => { n = Number(n); const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; } return `${i ? n.toFixed(1) : n} ${u[i]}`; };
const formatTime = (s) => !isFinite(s) ? "?" : s < 60 ? `${Math.ceil(s)} s` : s < 3600 ? `${Math.floor(s / 60)} min ${Math.ceil(s % 60)} s` : `${(s / 3600).toFixed(1)} h`;
const say = (id, text, error = false) => { $(id).textContent = text; $(id).classList.toggle("error", error); };

function signedIn() {
  $("signin").hidden = true; $("browser").hidden = false; $("signout").hidden = false; $("open-store").hidden = false;
  api.buckets().then((r) => { $("buckets").replaceChildren(...(r.items || []).map((b) => el("option", { value: b.name }))); }).catch(() => {});
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("bucket")) { $("bucket").value = hash.get("bucket"); openFolder(hash.get("bucket"), hash.get("prefix") || ""); } else $("bucket").focus();
}

function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  // A token in the fragment (make serve's link) never reaches the server or its logs.
  const offered = hash.get("token");
  if (offered) { hash.delete("token"); history.replaceState(null, "", `${location.pathname}${hash.size ? `#${hash}` : ""}`); }
  // A link must not swap the identity signed in here without asking: it could be someone
  // else's token, so that what this user uploads lands in their space.
  if (offered && api.token() && offered !== api.token()) return askToSwitch(offered);
  if (offered) api.setToken(offered);
  if (api.token()) signedIn(); else { $("signin").hidden = false; $("token").focus(); }
}

/** Who a token says it is (its `sub`), for people to compare; the server still verifies it. */
function subject(jwt) {
  try {
    const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(part), (c) => c.charCodeAt(0))));
    return String(claims.larder_sa || claims.sub || "an unnamed identity");
  } catch (_) { return "an unreadable token"; }
}

function askToSwitch(offered) {
  $("switch-new").textContent = subject(offered);
  $("switch-current").textContent = subject(api.token());
  $("switch").hidden = false;
  $("switch-keep").focus();
  $("switch-accept").onclick = () => { $("switch").hidden = true; api.setToken(offered); signedIn(); };
  $("switch-keep").onclick = () => { $("switch").hidden = true; signedIn(); };
}

$("signin-form").addEventListener("submit", (e) => { e.preventDefault(); api.setToken($("token").value.trim()); signedIn(); });
$("signout").addEventListener("click", () => { api.setToken(null); location.hash = ""; location.reload(); });
$("bucket-form").addEventListener("submit", (e) => { e.preventDefault(); openFolder($("bucket").value.trim(), ""); });
$("filter").addEventListener("input", () => load(true));
$("sort").addEventListener("change", () => sortChanged());
for (const b of document.querySelectorAll("[data-view]")) b.addEventListener("click", () => setView(b.dataset.view));

function openFolder(bucket, prefix) {
  Object.assign(state, { bucket, prefix }); state.selected.clear();
  history.replaceState(null, "", `#bucket=${api.enc(bucket)}&prefix=${api.enc(prefix)}`);
  crumbs(); $("filter").value = ""; load(true);
}

function crumbs() {
  const parts = state.prefix.split("/").filter(Boolean);
  const links = [el("a", { href: "#", textContent: state.bucket, onclick: (e) => { e.preventDefault(); openFolder(state.bucket, ""); } })];
  parts.forEach((p, i) => { const prefix = parts.slice(0, i + 1).join("/") + "/"; links.push(" / ", el("a", { href: "#", textContent: p, onclick: (e) => { e.preventDefault(); openFolder(state.bucket, prefix); } })); });
  $("crumbs").replaceChildren(...links);
}

async function load(reset) {
  if (state.loading && !reset) return;
  if (reset) Object.assign(state, { items: [], prefixes: [], next: null });
  state.loading = true;
  // Only the latest listing is shown: a reload started while a page was on its way wins.
  const ticket = (state.ticket = (state.ticket || 0) + 1);
  try {
    // Pages of 200 as the user scrolls; the API's largest (1000) when the sort needs the whole folder.
    const page = await api.list(state.bucket, state.prefix + $("filter").value, reset ? null : state.next, $("sort").value === "name" ? 200 : 1000);
    if (ticket !== state.ticket) return;
    state.items.push(...(page.items || []).filter((i) => i.name !== state.prefix));
    state.prefixes.push(...(page.prefixes || []));
    state.next = page.nextPageToken || null;
    showCount();
    state.loading = false;
    sorted();
    render();
    // The API lists in name order: another order needs the whole folder, so it loads every page.
    if (state.next && $("sort").value !== "name") load(false);
  } catch (error) { if (ticket === state.ticket) say("status", error.message, true); } finally { if (ticket === state.ticket) state.loading = false; }
}

function showCount() {
  say("status", `${count(state.prefixes.length, "folder")}, ${count(state.items.length, "object")}${state.next ? ($("sort").value === "name" ? " (scroll for more)" : " (loading all to sort…)") : ""}`);
}

function sortChanged() { sorted(); render(); if (state.next && !state.loading) load(false); showCount(); }
function sorted() {
  const key = $("sort").value;
  state.items.sort((a, b) => key === "size" ? Number(b.size || 0) - Number(a.size || 0) || a.name.localeCompare(b.name) : key === "updated" ? (b.updated || "").localeCompare(a.updated || "") || a.name.localeCompare(b.name) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

function setView(view) {
  state.view = view;
  for (const b of document.querySelectorAll("[data-view]")) b.setAttribute("aria-pressed", String(b.dataset.view === view));
  $("listing").className = view;
  render();
}

// The listing is virtual: only the lines near the viewport are in the DOM (a folder of 10,000
// objects is 10,000 entries in memory, a few dozen elements on the page). Lines have a fixed
// height; the list is one line per entry, the grid as many tiles a line as fit.
const LINE = { list: 36, grid: 196 }, TILE = 168, OVERSCAN = 6;
const entries = () => [...state.prefixes.map((p) => ({ folder: p })), ...state.items];
function layout() {
  const perLine = state.view === "grid" ? Math.max(1, Math.floor($("listing").clientWidth / TILE)) : 1;
  const all = entries();
  return { all, perLine, lines: Math.ceil(all.length / perLine), height: LINE[state.view] };
}

let frame = 0;
const schedule = () => { if (!frame) frame = requestAnimationFrame(() => { frame = 0; render(); }); };
addEventListener("scroll", schedule, { passive: true });
addEventListener("resize", schedule);

function render() {
  const { all, perLine, lines, height } = layout();
  const box = $("listing"), top = box.getBoundingClientRect().top;
  const first = Math.max(0, Math.floor(-top / height) - OVERSCAN);
  const last = Math.min(lines, Math.ceil((innerHeight - top) / height) + OVERSCAN);
  box.style.height = `${lines * height}px`;
  const nodes = [];
  const draw = (index) => {
    const node = state.view === "grid" ? tile(all[index]) : row(all[index]);
    node.style.top = `${Math.floor(index / perLine) * height}px`;
    if (state.view === "grid") node.style.left = `${(index % perLine) * TILE}px`;
    node.setAttribute("aria-posinset", index + 1); node.setAttribute("aria-setsize", all.length);
    nodes.push(node);
  };
  // Keep the focused entry focused when it is drawn again. It is drawn wherever it is, even
  // scrolled far out of view, with its neighbours (in list order, so Tab and Shift+Tab go on
  // from it): a keyboard user's place in the list survives scrolling.
  const focused = document.activeElement?.closest?.("#listing [data-key]")?.dataset.key;
  const focusedPart = document.activeElement?.dataset?.part;
  const start = first * perLine, end = Math.min(all.length, last * perLine);
  const at = focused ? all.findIndex((entry) => (entry.folder || entry.name) === focused) : -1;
  const island = [at - 1, at, at + 1].filter((i) => at >= 0 && i >= 0 && i < all.length && (i < start || i >= end));
  for (const index of island.filter((i) => i < start)) draw(index);
  for (let index = start; index < end; index++) draw(index);
  for (const index of island.filter((i) => i >= end)) draw(index);
  box.replaceChildren(...nodes);
  if (focused) box.querySelector(`[data-key="${CSS.escape(focused)}"] [data-part="${focusedPart}"]`)?.focus({ preventScroll: true });
  $("selection").textContent = state.selected.size ? `${state.selected.size} selected` : "";
  $("delete-selected").disabled = state.selected.size === 0;
  // Near the end of what is loaded: ask for the next page.
  if (state.next && last >= lines - OVERSCAN && !state.loading) load(false);
}

function openLink(entry, label) {
  return el("a", { href: "#", textContent: label, dataset: { part: "open" }, onclick: (e) => { e.preventDefault(); entry.folder ? openFolder(state.bucket, entry.folder) : openObject(entry.name); } });
}
function checkbox(entry) {
  return el("input", { type: "checkbox", checked: state.selected.has(entry.name), ariaLabel: `select ${entry.name.slice(state.prefix.length)}`, dataset: { part: "select" },
    onchange: (e) => { e.target.checked ? state.selected.add(entry.name) : state.selected.delete(entry.name); render(); } });
}
function row(entry) {
  const label = (entry.folder || entry.name).slice(state.prefix.length);
  return el("div", { className: "entry", role: "listitem", dataset: { key: entry.folder || entry.name } },
    entry.folder ? el("span", { className: "check" }) : checkbox(entry), openLink(entry, label),
    el("span", { className: "size", textContent: entry.folder ? "folder" : entry.size === undefined ? "" : formatSize(entry.size) }),
    el("span", { className: "date", textContent: entry.updated ? new Date(entry.updated).toLocaleString() : "" }));
}

// Thumbnails are the server's image variants (libvips, ?width&height&format=webp) fetched with the
// token onto blob: URLs, only for the tiles drawn; any other type shows an icon with its extension.
const thumbs = new Map();
function tile(entry) {
  const label = (entry.folder || entry.name).slice(state.prefix.length);
  const picture = el("div", { className: "thumb" });
  const type = entry.contentType || "";
  const icon = () => picture.replaceChildren(el("span", { className: "type-icon", ariaHidden: "true", textContent: entry.folder ? "DIR" : (label.includes(".") ? label.split(".").pop().slice(0, 4).toUpperCase() : "FILE") }));
  if (!entry.folder && type.startsWith("image/") && type !== "image/svg+xml") {
    const key = `${state.bucket}/${entry.name}#${entry.generation}`;
    if (!thumbs.has(key)) {
      // At most 300 kept: the oldest blob: URLs are released (a Map iterates in insertion order).
      for (const [old, url] of thumbs) { if (thumbs.size < 300) break; thumbs.delete(old); url.then((u) => u && URL.revokeObjectURL(u)); }
      thumbs.set(key, api.thumbnail(state.bucket, entry.name, 160).then((b) => URL.createObjectURL(b)).catch(() => null));
    }
    icon();
    thumbs.get(key).then((url) => { if (url) picture.replaceChildren(el("img", { src: url, alt: "" , className: "thumbnail" })); });
  } else icon();
  return el("div", { className: "entry tile", role: "listitem", dataset: { key: entry.folder || entry.name } },
    picture, el("div", { className: "tile-name" }, entry.folder ? el("span", { className: "check" }) : checkbox(entry), openLink(entry, label)),
    el("span", { className: "size", textContent: entry.folder ? "folder" : entry.size === undefined ? "" : formatSize(entry.size) }));
}

// Confirmations share one dialog; the action runs only on OK.
let pending = null;
function confirmThen(text, action) { pending = action; $("confirm-text").textContent = text; $("confirm").returnValue = ""; $("confirm").showModal(); }
$("confirm").addEventListener("close", () => { const action = pending; pending = null; if ($("confirm").returnValue === "ok" && action) action(); });

$("delete-selected").addEventListener("click", () => {
  const names = [...state.selected];
  confirmThen(`Delete ${names.length} object${names.length === 1 ? "" : "s"}? This cannot be undone.`, async () => {
    let failed = 0, message = "";
    for (const name of names) {
      try { await api.remove(state.bucket, name); state.selected.delete(name); } catch (error) { failed++; message = `${name}: ${error.message}`; }
    }
    say("notice", failed ? `Deleted ${names.length - failed}, ${failed} refused (${message}).` : `Deleted ${count(names.length, "object")}.`, failed > 0);
    load(true);
  });
});

// Upload: tus with progress, speed and time left, pause/resume/cancel; a large file resumes after
// a reload when picked again. At most three run at once; the rest wait their turn.
const queue = [];
let running = 0;
function enqueue(file, relative) { queue.push(upload(file, relative)); pump(); }
function pump() { while (running < 3 && queue.length) { running++; queue.shift()().finally(() => { running--; pump(); }); } }
let reload = 0;
const reloadSoon = () => { clearTimeout(reload); reload = setTimeout(() => load(true), 250); };

$("files").addEventListener("change", () => { for (const file of $("files").files) enqueue(file, file.name); $("files").value = ""; });
$("folder").addEventListener("change", () => { for (const file of $("folder").files) enqueue(file, file.webkitRelativePath || file.name); $("folder").value = ""; });

function upload(file, relative) {
  const name = state.prefix + relative;
  const bar = el("progress", { max: file.size || 1, value: 0, ariaLabel: `progress of ${relative}` }), text = el("span", { className: "upload-text", textContent: "queued" });
  const pause = el("button", { type: "button", textContent: "Pause", ariaLabel: `pause ${relative}` }), cancel = el("button", { type: "button", textContent: "Cancel", ariaLabel: `cancel ${relative}` });
  const item = el("li", { dataset: { name } }, el("strong", { textContent: name }), " ", text, " ", pause, " ", cancel, bar);
  $("uploads").append(item);
  let began = 0, base = 0;
  const job = new api.Upload(state.bucket, name, file, (sent) => {
    bar.value = sent;
    const rate = (sent - base) / Math.max((performance.now() - began) / 1000, 0.001);
    text.textContent = `${formatSize(sent)} of ${formatSize(file.size)}${job.resumedAt ? ` (resumed at ${formatSize(job.resumedAt)})` : ""}, ${formatSize(rate)}/s, ${rate > 0 ? formatTime((file.size - sent) / rate) : "?"} left`;
  });
  const finish = (how, message) => { item.dataset.state = how; pause.remove(); cancel.remove(); $("clear-uploads").hidden = false; if (message) { text.textContent = message; text.className = "error"; } };
  const run = () => { began = performance.now(); base = Number(bar.value); return job.start().then((how) => {
    if (how === "paused") { text.textContent = `paused at ${formatSize(bar.value)}`; pause.textContent = "Resume"; pause.setAttribute("aria-label", `resume ${relative}`); item.dataset.state = "paused"; return; }
    text.textContent = `done${job.resumedAt ? ` (resumed at ${formatSize(job.resumedAt)})` : ""}`; finish("done"); reloadSoon();
  }).catch((error) => { if (error.cancelled) { text.textContent = "cancelled"; finish("cancelled"); } else finish("failed", error.message); }); };
  pause.addEventListener("click", () => { if (job.paused) { job.paused = false; pause.textContent = "Pause"; pause.setAttribute("aria-label", `pause ${relative}`); item.dataset.state = "running"; run(); } else job.paused = true; });
  cancel.addEventListener("click", () => { const idle = item.dataset.state === "paused" || text.textContent === "queued"; job.cancel(); if (idle) { text.textContent = "cancelled"; finish("cancelled"); } });
  return () => (job.cancelled ? Promise.resolve() : (item.dataset.state = "running", run()));
}

$("clear-uploads").addEventListener("click", () => {
  for (const li of $("uploads").querySelectorAll("li")) if (["done", "cancelled", "failed"].includes(li.dataset.state)) li.remove();
  $("clear-uploads").hidden = true; $("files").focus();
});

// Drag and drop: files and whole folders (folders through the entries API, read recursively).
const drop = $("browser");
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("dropping"); });
drop.addEventListener("dragleave", () => drop.classList.remove("dropping"));
drop.addEventListener("drop", async (e) => {
  e.preventDefault(); drop.classList.remove("dropping");
  const roots = [...(e.dataTransfer.items || [])].map((i) => i.webkitGetAsEntry?.()).filter(Boolean);
  if (!roots.length) { for (const file of e.dataTransfer.files) enqueue(file, file.name); return; }
  const walk = async (entry, path) => {
    if (entry.isFile) { enqueue(await new Promise((ok, fail) => entry.file(ok, fail)), path + entry.name); return; }
    const reader = entry.createReader();
    for (;;) { const batch = await new Promise((ok, fail) => reader.readEntries(ok, fail)); if (!batch.length) break; for (const child of batch) await walk(child, `${path}${entry.name}/`); }
  };
  for (const root of roots) await walk(root, "");
});

// The object panel.
let previewURL = null;
async function openObject(name) {
  say("panel-status", "");
  try {
    const meta = await api.metadata(state.bucket, name);
    state.current = meta;
    $("panel").hidden = false; $("panel-title").textContent = name;
    const facts = [["Declared type", meta.contentType], ["Detected type", meta.detectedContentType], ["Size", `${formatSize(meta.size)} (${meta.size} bytes)`], ["SHA-256", meta.sha256], ["MD5", meta.md5Hash || "computing…"], ["Generation", meta.generation], ["Metageneration", meta.metageneration], ["Created", meta.timeCreated], ["Updated", meta.updated], ["Cache-Control", meta.cacheControl || "—"], ["Content-Disposition", meta.contentDisposition || "—"], ["Content-Encoding", meta.contentEncoding || "—"], ["Content-Language", meta.contentLanguage || "—"]];
    $("facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", { textContent: k }), el("dd", { textContent: v ?? "—" })]));
    $("meta-rows").replaceChildren(...Object.entries(meta.metadata || {}).map(([k, v]) => metaRow(k, v)));
    $("url").value = "";
    $("panel").focus();
    preview(meta);
  } catch (error) { say("status", error.message, true); }
}

function metaRow(k = "", v = "") {
  const n = document.querySelectorAll(".meta-row").length;
  const row = el("div", { className: "meta-row" },
    el("input", { value: k, ariaLabel: `key ${n + 1}`, className: "meta-key" }),
    el("input", { value: v, ariaLabel: `value ${n + 1}`, className: "meta-value" }));
  row.append(el("button", { type: "button", textContent: "Remove", ariaLabel: `remove key ${n + 1}`, onclick: () => row.remove() }));
  return row;
}

// Previews come from bytes fetched with the token, shown through blob: URLs; HTML and SVG are
// shown as text, never rendered. A PDF goes in a frame on a blob typed application/pdf, which
// Chromium and Firefox hand to their PDF viewer (a sandboxed frame would block the viewer); the
// blob's type is fixed here from the detected type, so nothing stored can make it a page.
async function preview(meta) {
  if (previewURL) URL.revokeObjectURL(previewURL);
  const box = $("preview"); box.replaceChildren();
  const type = (meta.detectedContentType || meta.contentType || "").split(";")[0];
  const active = /html|svg|xml|javascript/.test(type) || /html|svg|xml|javascript/.test(meta.contentType);
  if (Number(meta.size) > 20 * 1024 * 1024) { box.append(el("p", { textContent: "Too large to preview." })); return; }
  const kind = active || type.startsWith("text/") || type === "application/json" ? "text" : type.startsWith("image/") ? "image" : type.startsWith("video/") ? "video" : type.startsWith("audio/") ? "audio" : type === "application/pdf" ? "pdf" : null;
  if (!kind) return;
  try {
    const blob = await api.bytes(meta.bucket, meta.name);
    if (kind === "text") { box.append(el("pre", { textContent: (await blob.slice(0, 65536).text()) })); return; }
    previewURL = URL.createObjectURL(new Blob([blob], { type }));
    if (kind === "image") box.append(el("img", { src: previewURL, alt: `preview of ${meta.name}` }));
    else if (kind === "pdf") box.append(el("iframe", { src: previewURL, title: `preview of ${meta.name}` }));
    else box.append(el(kind, { src: previewURL, controls: true, ariaLabel: `preview of ${meta.name}` }));
  } catch (error) { box.append(el("p", { className: "error", textContent: error.message })); }
}

function closePanel() {
  $("panel").hidden = true;
  const back = state.current && $("listing").querySelector(`[data-key="${CSS.escape(state.current.name)}"] a`);
  (back || $("listing").querySelector("a") || $("filter")).focus();
}
$("close-panel").addEventListener("click", closePanel);
$("meta-add").addEventListener("click", () => { const row = metaRow(); $("meta-rows").append(row); row.querySelector("input").focus(); });
$("meta-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const wanted = {};
  for (const row of document.querySelectorAll(".meta-row")) { const k = row.querySelector(".meta-key").value.trim(); if (k) wanted[k] = row.querySelector(".meta-value").value; }
  const metadata = { ...wanted };
  for (const k of Object.keys(state.current.metadata || {})) if (!(k in wanted)) metadata[k] = null;
  try { state.current = await api.patch(state.current.bucket, state.current.name, { metadata }); say("panel-status", "Metadata saved."); } catch (error) { say("panel-status", error.message, true); }
});
$("download").addEventListener("click", async () => {
  try { const blob = await api.bytes(state.current.bucket, state.current.name); const a = el("a", { href: URL.createObjectURL(blob), download: state.current.name.split("/").pop() }); a.click(); URL.revokeObjectURL(a.href); } catch (error) { say("panel-status", error.message, true); }
});
$("copy-url").addEventListener("click", async () => {
  const url = api.downloadURL(state.current); $("url").value = url; $("url").select();
  try { await navigator.clipboard.writeText(url); say("panel-status", "Download URL copied."); } catch (_) { say("panel-status", "Download URL selected: copy it with Ctrl+C."); }
});
$("rotate").addEventListener("click", async () => {
  try { state.current = await api.patch(state.current.bucket, state.current.name, { rotateDownloadToken: true }); $("url").value = api.downloadURL(state.current); say("panel-status", "Token rotated: the old download URL no longer works."); } catch (error) { say("panel-status", error.message, true); }
});
$("delete").addEventListener("click", () => confirmThen(`Delete ${state.current.name}? This cannot be undone.`, async () => {
  try { await api.remove(state.current.bucket, state.current.name); $("panel").hidden = true; say("notice", `Deleted ${state.current.name}.`); load(true); $("filter").focus(); } catch (error) { say("panel-status", error.message, true); }
}));

// Rename / move: copy to the new name, then delete the old one (not atomic: see api.rename).
$("rename").addEventListener("click", () => { $("new-name").value = state.current.name; say("rename-status", ""); $("rename-dialog").showModal(); $("new-name").select(); });
$("rename-form").addEventListener("submit", async (e) => {
  if (e.submitter?.value !== "ok") return;
  e.preventDefault();
  const target = $("new-name").value.trim();
  if (!target || target === state.current.name) { $("rename-dialog").close(); return; }
  try {
    await api.rename(state.current.bucket, state.current.name, state.current.generation, target);
    $("rename-dialog").close(); say("notice", `Renamed ${state.current.name} to ${target}.`); load(true); openObject(target);
  } catch (error) { say("rename-status", error.message, true); }
});

// The store view: counts from /admin/v1/store, which only admin identities may read.
$("open-store").addEventListener("click", async () => {
  $("store").hidden = false; $("store").focus(); say("store-status", "Loading…");
  try {
    const s = await api.store();
    const rows = [["Objects", s.objects], ["Logical bytes (sum of object sizes)", `${formatSize(s.logicalBytes)} (${s.logicalBytes})`], ["Stored bytes (distinct blobs)", `${formatSize(s.storedBytes)} (${s.storedBytes})`], ["Saved by deduplication", formatSize(s.dedupSavedBytes)], ["Blobs", s.blobs], ["Collectable blobs", s.collectable.blobs], ["Collectable bytes", `${formatSize(s.collectable.bytes)} (${s.collectable.bytes})`], ["Uploads in progress", `${s.uploadsInProgress.count} (${formatSize(s.uploadsInProgress.bytes)} received)`], ["Last gc", s.lastGC ? `${new Date(s.lastGC.finishedAt).toLocaleString()}: ${count(s.lastGC.blobsRemoved, "blob")}, ${formatSize(s.lastGC.bytesFreed)} freed` : "never"]];
    $("store-facts").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { textContent: k }), el("dd", { textContent: String(v) })]));
    // Each webhook subscription's backlog: what waits, how long the oldest has, what was given up.
    const subscriptions = s.eventSubscriptions || [];
    $("store-events").querySelector("tbody").replaceChildren(...(subscriptions.length ? subscriptions.map((e) => el("tr", { dataset: { subscription: e.id }, className: e.dead ? "has-dead" : "" },
      el("td", {}, el("span", { className: "sub-id", textContent: e.id }), el("span", { className: "sub-target", textContent: `${e.bucket} → ${e.url}` })),
      el("td", { className: "pending", textContent: String(e.pending) }),
      el("td", { className: "lag", textContent: e.pending ? formatTime(e.lagSeconds) : "—" }),
      el("td", { className: "dead", textContent: String(e.dead) }))) : [el("tr", {}, el("td", { colSpan: 4, textContent: "No webhook subscriptions." }))]));
    say("store-status", "");
  } catch (error) { $("store-facts").replaceChildren(); $("store-events").querySelector("tbody").replaceChildren(); say("store-status", error.message, true); }
});
const closeStore = () => { $("store").hidden = true; $("open-store").focus(); };
$("close-store").addEventListener("click", closeStore);

// Escape closes the topmost panel (dialogs close themselves on Escape).
addEventListener("keydown", (e) => {
  if (e.key !== "Escape" || document.querySelector("dialog[open]")) return;
  if (!$("panel").hidden) closePanel(); else if (!$("store").hidden) closeStore();
});

start();
