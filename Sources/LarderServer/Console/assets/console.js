// The Larder console: browse, upload, preview, edit metadata, share, delete; all through api.js.
import * as api from "./api.js";

const $ = (id) => document.getElementById(id);
const el = (tag, props = {}, ...children) => { const e = Object.assign(document.createElement(tag), props); e.append(...children); return e; };
const state = { bucket: "", prefix: "", items: [], prefixes: [], next: null, loading: false, current: null };
const formatSize = (n) => { n = Number(n); const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; } return `${i ? n.toFixed(1) : n} ${u[i]}`; };
const say = (id, text, error = false) => { $(id).textContent = text; $(id).classList.toggle("error", error); };

function signedIn() {
  $("signin").hidden = true; $("browser").hidden = false; $("signout").hidden = false;
  api.buckets().then((r) => { $("buckets").replaceChildren(...(r.items || []).map((b) => el("option", { value: b.name }))); }).catch(() => {});
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("bucket")) { $("bucket").value = hash.get("bucket"); openFolder(hash.get("bucket"), hash.get("prefix") || ""); } else $("bucket").focus();
}

function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  // A token in the fragment (make serve's link) never reaches the server or its logs.
  if (hash.get("token")) { api.setToken(hash.get("token")); hash.delete("token"); history.replaceState(null, "", `${location.pathname}${hash.size ? `#${hash}` : ""}`); }
  if (api.token()) signedIn(); else { $("signin").hidden = false; $("token").focus(); }
}

$("signin-form").addEventListener("submit", (e) => { e.preventDefault(); api.setToken($("token").value.trim()); signedIn(); });
$("signout").addEventListener("click", () => { api.setToken(null); location.hash = ""; location.reload(); });
$("bucket-form").addEventListener("submit", (e) => { e.preventDefault(); openFolder($("bucket").value.trim(), ""); });
$("filter").addEventListener("input", () => load(true));
$("sort").addEventListener("change", render);

function openFolder(bucket, prefix) {
  Object.assign(state, { bucket, prefix });
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
    const page = await api.list(state.bucket, state.prefix + $("filter").value, reset ? null : state.next);
    if (ticket !== state.ticket) return;
    state.items.push(...(page.items || []).filter((i) => i.name !== state.prefix));
    state.prefixes.push(...(page.prefixes || []));
    state.next = page.nextPageToken || null;
    say("status", `${state.prefixes.length} folders, ${state.items.length} objects${state.next ? " (scroll for more)" : ""}`);
    render();
  } catch (error) { if (ticket === state.ticket) say("status", error.message, true); } finally { if (ticket === state.ticket) state.loading = false; }
}

// Pages arrive as the user scrolls: the sentinel below the table asks for the next one.
new IntersectionObserver((entries) => { if (entries[0].isIntersecting && state.next) load(false); }).observe($("more"));

function render() {
  const key = $("sort").value;
  const items = [...state.items].sort((a, b) => key === "size" ? Number(b.size) - Number(a.size) : key === "updated" ? b.updated.localeCompare(a.updated) : a.name.localeCompare(b.name));
  const rows = state.prefixes.map((p) => el("tr", {}, el("td", {}, el("a", { href: "#", textContent: `${p.slice(state.prefix.length)}`, onclick: (e) => { e.preventDefault(); openFolder(state.bucket, p); } })), el("td", { textContent: "folder" }), el("td")));
  rows.push(...items.map((i) => el("tr", {}, el("td", {}, el("a", { href: "#", textContent: i.name.slice(state.prefix.length), onclick: (e) => { e.preventDefault(); openObject(i.name); } })), el("td", { textContent: formatSize(i.size) }), el("td", { textContent: new Date(i.updated).toLocaleString() }))));
  $("listing").tBodies[0].replaceChildren(...rows);
}

// Upload: tus with progress, speed and time left; a large file resumes after a reload when picked again.
$("files").addEventListener("change", () => { for (const file of $("files").files) upload(file); $("files").value = ""; });
function upload(file) {
  const name = state.prefix + file.name;
  const bar = el("progress", { max: file.size || 1, value: 0 }), text = el("span"), pause = el("button", { type: "button", textContent: "Pause" });
  const item = el("li", {}, el("strong", { textContent: name }), " ", text, " ", pause, bar);
  $("uploads").append(item);
  const began = performance.now();
  const job = new api.Upload(state.bucket, name, file, (sent) => {
    bar.value = sent;
    const rate = (sent - job.resumedAt) / Math.max((performance.now() - began) / 1000, 0.001);
    text.textContent = `${formatSize(sent)} of ${formatSize(file.size)}${job.resumedAt ? ` (resumed at ${formatSize(job.resumedAt)})` : ""}, ${formatSize(rate)}/s, ${rate > 0 ? Math.ceil((file.size - sent) / rate) : "?"} s left`;
  });
  const run = () => job.start().then((how) => {
    if (how === "paused") { text.textContent = `paused at ${formatSize(bar.value)}`; pause.textContent = "Resume"; return; }
    text.textContent = `done${job.resumedAt ? ` (resumed at ${formatSize(job.resumedAt)})` : ""}`; pause.remove(); item.dataset.state = "done"; load(true);
  }).catch((error) => { text.textContent = error.message; text.className = "error"; pause.remove(); item.dataset.state = "failed"; });
  pause.addEventListener("click", () => { if (job.paused) { job.paused = false; pause.textContent = "Pause"; run(); } else job.paused = true; });
  run();
}

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
    else box.append(el(kind, { src: previewURL, controls: true }));
  } catch (error) { box.append(el("p", { className: "error", textContent: error.message })); }
}

$("close-panel").addEventListener("click", () => { $("panel").hidden = true; $("listing").querySelector("a")?.focus(); });
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
$("delete").addEventListener("click", () => { $("confirm-text").textContent = `Delete ${state.current.name}? This cannot be undone.`; $("confirm").showModal(); });
$("confirm").addEventListener("close", async () => {
  if ($("confirm").returnValue !== "ok") return;
  try { await api.remove(state.current.bucket, state.current.name); $("panel").hidden = true; say("status", `Deleted ${state.current.name}.`); load(true); } catch (error) { say("panel-status", error.message, true); }
});

start();
