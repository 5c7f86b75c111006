// The Larder console: sign in, browse, upload, preview, edit metadata, download, share, rename,
// delete (folders too), store counts; all through api.js.
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
const state = { bucket: "", prefix: "", items: [], prefixes: [], next: null, loading: false, going: null, current: null, view: "list", selected: new Set(), session: null, buckets: [] };
// "1 folder", "2 folders".
const count = (n, word) => `${n} ${word}${Number(n) === 1 ? "" : "s"}`;
const formatSize = (n) => { n = Number(n); const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; } return `${i ? n.toFixed(1) : n} ${u[i]}`; };
const formatTime = (s) => !isFinite(s) ? "?" : s < 60 ? `${Math.ceil(s)} s` : s < 3600 ? `${Math.floor(s / 60)} min ${Math.ceil(s % 60)} s` : `${(s / 3600).toFixed(1)} h`;
const timers = {};
// Notices clear themselves; the listing's status line and refusals stay until replaced.
const say = (id, text, error = false) => {
  $(id).textContent = text; $(id).classList.toggle("error", error);
  clearTimeout(timers[id]);
  if (text && ["notice", "panel-status"].includes(id)) timers[id] = setTimeout(() => { if ($(id).textContent === text) say(id, ""); }, error ? 15000 : 6000);
};

/** A refusal said in words: what was refused, on what, and why, from what the console asked. */
function words(error, { op, what }) {
  const status = error.status, server = error.serverMessage || error.message;
  if (status === 403) return `The rules do not allow you to ${op} ${what} (403).`;
  if (status === 404) return `${what[0].toUpperCase()}${what.slice(1)} does not exist (404).`;
  if (status === 401) return `Your sign-in was refused: ${signinReason(server)}`;
  if (status === 429 || status === 503) return `The server is busy: ${server}. Try again in a moment (${status}).`;
  return status ? `Could not ${op} ${what}: ${server} (${status}).` : `Could not ${op} ${what}: ${server}.`;
}

/** Why the server refused a token, in words (the authenticator's messages, LarderAuth/AuthError.swift). */
function signinReason(message) {
  const expired = /token expired at (\d+)/.exec(message);
  if (expired) {
    const at = new Date(Number(expired[1]) * 1000), minutes = Math.round((Date.now() - at) / 60000);
    const ago = minutes < 1 ? "just now" : minutes < 120 ? `${minutes} minute${minutes === 1 ? "" : "s"} ago` : minutes < 2880 ? `${Math.round(minutes / 60)} hours ago` : `${Math.round(minutes / 1440)} days ago`;
    return `this token expired ${ago} (${at.toLocaleString()}). Get a new one (below) and sign in again.`;
  }
  if (/malformed token|token of \d+ bytes/.test(message)) return "that is not a token. A token is three parts separated by dots (eyJ….eyJ….…): copy the whole of it.";
  if (/signature is invalid|no key/.test(message)) return "this token was not signed by this server (it comes from another server or data directory, or it was changed).";
  if (/not valid before/.test(message)) return "this token is not valid yet (it starts in the future: check the clocks).";
  if (/issuer|audience/.test(message)) return "this token was issued for another service (its issuer or audience is not the one this server accepts).";
  if (/Authorization/.test(message)) return "sign in with a token.";
  return `${message}.`;
}
// Below 1,024 px the panels open under the listing (console.css), not beside it.
const narrow = () => matchMedia("(max-width: 1023.98px)").matches;
const where = (bucket, prefix) => prefix ? `the folder ${prefix} in bucket ${bucket}` : `the top of bucket ${bucket}`;

/** Shows one of the top sections: sign-in, the identity switch, or the browser. */
function show(section) {
  for (const id of ["signin", "switch", "browser"]) $(id).hidden = id !== section;
  if (section !== "browser") { $("panel").hidden = true; $("store").hidden = true; }
  $("signout").hidden = section !== "browser";
  $("open-store").hidden = !(section === "browser" && state.session?.admin);
}

function showSignin(reason = "") {
  show("signin");
  $("signin-reason").textContent = reason;
  $("signin-reason").hidden = !reason;
  $("token").value = "";
  $("token").focus();
}

/** Checks `candidate` with the server (one request) before keeping it; refused, says why. */
async function signIn(candidate) {
  say("signin-status", "Checking the token…");
  try {
    const session = await api.session(candidate);
    api.setToken(candidate);
    state.session = session;
    say("signin-status", "");
    await signedIn();
  } catch (error) {
    say("signin-status", "");
    if (error.status === 401) showSignin(`Not signed in: ${signinReason(error.serverMessage)}`);
    else showSignin(`Not signed in: the server could not check the token (${error.message}).`);
  }
}

async function signedIn() {
  show("browser");
  $("new-bucket").hidden = !state.session.admin;
  $("share").hidden = !state.session.admin;
  // Users get the buckets the server offers (--console-buckets); admins every bucket (GCS buckets.list) too.
  let names = [...state.session.buckets];
  if (state.session.admin) {
    try { names.push(...((await api.buckets()).items || []).map((b) => b.name)); } catch (_) { /* the offered ones still work */ }
  }
  state.buckets = [...new Set(names)].sort();
  fillBuckets();
  const place = placeInURL();
  if (place.bucket) openFolder(place.bucket, place.prefix, "replace"); else { clearListing(); $("bucket").focus(); }
}

function fillBuckets() {
  const names = state.bucket && !state.buckets.includes(state.bucket) ? [...state.buckets, state.bucket].sort() : state.buckets;
  $("bucket").replaceChildren(el("option", { value: "", textContent: "Choose a bucket" }), ...names.map((name) => el("option", { value: name, textContent: name })));
  $("bucket").value = state.bucket;
}

/** The bucket and folder the URL names (`#bucket=app&prefix=users%2Fdev%2F`). */
function placeInURL() {
  const hash = new URLSearchParams(location.hash.slice(1));
  return { bucket: hash.get("bucket") || "", prefix: hash.get("prefix") || "" };
}
const placeHash = (bucket, prefix) => `#bucket=${api.enc(bucket)}&prefix=${api.enc(prefix)}`;

function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  // A token in the fragment (make serve's link) never reaches the server or its logs.
  const offered = hash.get("token");
  if (offered) { hash.delete("token"); history.replaceState(null, "", `${location.pathname}${hash.size ? `#${hash}` : ""}`); }
  // A link must not swap the identity signed in here without asking: it could be someone
  // else's token, so that what this user uploads lands in their space.
  // (A refused token is forgotten at once, so a link opened on the sign-in page is simply used.)
  if (offered && api.token() && offered !== api.token()) return askToSwitch(offered);
  const candidate = offered || api.token();
  if (candidate) signIn(candidate); else showSignin();
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
  show("switch");
  $("switch-keep").focus();
  $("switch-accept").onclick = () => signIn(offered);
  $("switch-keep").onclick = () => signIn(api.token());
}

$("signin-form").addEventListener("submit", (e) => { e.preventDefault(); signIn($("token").value.trim()); });
$("signout").addEventListener("click", () => { api.setToken(null); location.hash = ""; location.reload(); });
// Any 401 later (the token expired, its key was revoked): back to sign-in with the reason; the
// URL keeps the bucket and folder, so signing in again returns there.
api.onUnauthorized((error) => {
  if (!api.token()) return;
  api.setToken(null); state.session = null;
  showSignin(`Signed out: ${signinReason(error.serverMessage)}`);
});
$("bucket").addEventListener("change", () => { if ($("bucket").value) openFolder($("bucket").value, ""); });
// The filter asks the server once the typing pauses, not on every key.
let filtering = 0;
$("filter").addEventListener("input", () => { clearTimeout(filtering); filtering = setTimeout(() => load(true), 300); });
$("sort").addEventListener("change", () => sortChanged());
for (const b of document.querySelectorAll("[data-view]")) b.addEventListener("click", () => setView(b.dataset.view));
// A link opened in this tab (a #token= link, a bookmark, Back and Forward) is followed without a reload.
addEventListener("hashchange", () => { if (new URLSearchParams(location.hash.slice(1)).get("token")) start(); else followURL(); });
addEventListener("popstate", () => followURL());

function followURL() {
  if (!state.session || $("browser").hidden) return;
  const place = placeInURL();
  // (A fragment link fires both hashchange and popstate: the second finds its folder on its way.)
  const shown = state.going || state;
  if (place.bucket === shown.bucket && place.prefix === shown.prefix) return;
  if (place.bucket) openFolder(place.bucket, place.prefix, "none"); else clearListing();
}

/** Opens a folder: the listing, breadcrumbs and URL change only once the server has answered
 * it; refused, the last good folder stays, and the refusal is said. `how` is what happens to
 * history: "push" (a new entry: Back returns), "replace", or "none" (Back/Forward got here). */
function openFolder(bucket, prefix, how = "push") { return load(true, { bucket, prefix, how }); }

function clearListing() {
  Object.assign(state, { bucket: "", prefix: "", items: [], prefixes: [], next: null }); state.selected.clear();
  crumbs(); fillBuckets(); uploadable(); render(); say("status", "");
}

function uploadable() {
  const off = !state.bucket;
  for (const id of ["files", "folder"]) { $(id).disabled = off; document.querySelector(`label[for=${id}]`).classList.toggle("disabled", off); document.querySelector(`label[for=${id}]`).setAttribute("aria-disabled", String(off)); }
  $("new-folder").disabled = off;
  $("upload-hint").textContent = off ? "Choose a bucket to upload" : "or drop files and folders here";
}

function crumbs() {
  const parts = state.prefix.split("/").filter(Boolean);
  const link = (text, prefix) => el("a", { href: placeHash(state.bucket, prefix), textContent: text, onclick: (e) => { e.preventDefault(); openFolder(state.bucket, prefix); } });
  const links = state.bucket ? [link(state.bucket, "")] : [];
  parts.forEach((p, i) => links.push(" / ", link(p, parts.slice(0, i + 1).join("/") + "/")));
  $("crumbs").replaceChildren(...links);
}

async function load(reset, target = null) {
  if (state.loading && !reset) return;
  // A refresh while another folder is on its way (an upload ended, the filter changed) lists that
  // folder: the one shown is about to go, and refreshing it would cancel the move.
  if (!target && reset && state.going) target = state.going;
  const bucket = target ? target.bucket : state.bucket, prefix = target ? target.prefix : state.prefix;
  if (!bucket) return;
  state.loading = true;
  // Only the latest listing is shown: a reload started while a page was on its way wins.
  const ticket = (state.ticket = (state.ticket || 0) + 1);
  state.going = target;
  try {
    // Pages of 200 as the user scrolls; the API's largest (1000) when the sort needs the whole folder.
    const page = await api.list(bucket, prefix + (target ? "" : $("filter").value), reset ? null : state.next, $("sort").value === "name" ? 200 : 1000);
    if (ticket !== state.ticket) return;
    if (target) {
      const moved = bucket !== state.bucket || prefix !== state.prefix;
      Object.assign(state, { bucket, prefix });
      if (moved) { state.selected.clear(); $("filter").value = ""; }
      const url = `${location.pathname}${placeHash(bucket, prefix)}`;
      if (target.how === "push" && `${location.pathname}${location.hash}` !== url) history.pushState(null, "", url);
      else if (target.how === "replace") history.replaceState(null, "", url);
      crumbs(); fillBuckets(); uploadable();
    }
    if (reset) Object.assign(state, { items: [], prefixes: [], next: null });
    state.items.push(...(page.items || []).filter((i) => i.name !== state.prefix));
    state.prefixes.push(...(page.prefixes || []));
    state.next = page.nextPageToken || null;
    showCount();
    state.loading = false;
    sorted();
    render();
    // The API lists in name order: another order needs the whole folder, so it loads every page.
    if (state.next && $("sort").value !== "name") load(false);
  } catch (error) {
    if (ticket !== state.ticket || error.status === 401) return;
    // Back or Forward to a folder now refused: the URL goes back to the folder still shown.
    if (target?.how === "none" && state.bucket) history.replaceState(null, "", `${location.pathname}${placeHash(state.bucket, state.prefix)}`);
    fillBuckets();
    const still = state.bucket && target ? ` Still showing ${where(state.bucket, state.prefix)}.` : "";
    say("status", words(error, { op: "list", what: where(bucket, prefix) }) + still, true);
  } finally { if (ticket === state.ticket) Object.assign(state, { loading: false, going: null }); }
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
  const chosen = all.filter((entry) => state.selected.has(entry.folder || entry.name)).length;
  $("select-all").checked = all.length > 0 && chosen === all.length;
  $("select-all").indeterminate = chosen > 0 && chosen < all.length;
  // Near the end of what is loaded: ask for the next page.
  if (state.next && last >= lines - OVERSCAN && !state.loading) load(false);
}

function openLink(entry, label) {
  return el("a", { href: entry.folder ? placeHash(state.bucket, entry.folder) : "#", textContent: label, dataset: { part: "open" }, onclick: (e) => { e.preventDefault(); entry.folder ? openFolder(state.bucket, entry.folder) : openObject(entry.name); } });
}
// Folders are selected by their prefix (ending in "/"), objects by their name.
function checkbox(entry) {
  const key = entry.folder || entry.name;
  return el("input", { type: "checkbox", checked: state.selected.has(key), ariaLabel: `select ${key.slice(state.prefix.length)}`, dataset: { part: "select" },
    onchange: (e) => { e.target.checked ? state.selected.add(key) : state.selected.delete(key); render(); } });
}
$("select-all").addEventListener("change", (e) => {
  if (e.target.checked) for (const entry of entries()) state.selected.add(entry.folder || entry.name); else state.selected.clear();
  render();
  if (e.target.checked && state.next) say("notice", `Selected the ${count(state.selected.size, "entry")} loaded so far: scroll to load more.`);
});
function row(entry) {
  const label = (entry.folder || entry.name).slice(state.prefix.length);
  return el("div", { className: "entry", role: "listitem", dataset: { key: entry.folder || entry.name } },
    checkbox(entry), openLink(entry, label),
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
    picture, el("div", { className: "tile-name" }, checkbox(entry), openLink(entry, label)),
    el("span", { className: "size", textContent: entry.folder ? "folder" : entry.size === undefined ? "" : formatSize(entry.size) }));
}

// Confirmations share one dialog; the action runs only on OK.
let pending = null;
function confirmThen(text, action, ok = "Delete") { pending = action; $("confirm-text").textContent = text; $("confirm-ok").textContent = ok; $("confirm").returnValue = ""; $("confirm").showModal(); }
$("confirm").addEventListener("close", () => { const action = pending; pending = null; if ($("confirm").returnValue === "ok" && action) action(); });

$("delete-selected").addEventListener("click", () => {
  const keys = [...state.selected], folders = keys.filter((k) => k.endsWith("/")), names = keys.filter((k) => !k.endsWith("/"));
  const what = [names.length ? count(names.length, "object") : "", folders.length ? `${count(folders.length, "folder")} with everything in ${folders.length === 1 ? "it" : "them"}` : ""].filter(Boolean).join(" and ");
  confirmThen(`Delete ${what}? This cannot be undone.`, async () => {
    const refused = [];
    let deleted = 0;
    $("refused-box").hidden = true;
    for (const name of names) {
      try { await api.remove(state.bucket, name); deleted++; state.selected.delete(name); } catch (error) { refused.push({ name, reason: words(error, { op: "delete", what: "it" }) }); }
    }
    for (const folder of folders) {
      const result = await deleteFolder(folder, (n) => `Deleting ${folder.slice(state.prefix.length)}: ${count(deleted + n, "object")} deleted${refused.length ? `, ${refused.length} refused` : ""}…`);
      deleted += result.deleted; refused.push(...result.refused);
      state.selected.delete(folder);
    }
    $("deleting").hidden = true;
    if (refused.length) showRefused(refused);
    say("notice", refused.length ? `Deleted ${count(deleted, "object")}; ${refused.length} refused (listed above).` : `Deleted ${count(deleted, "object")}.`, refused.length > 0);
    load(true);
  });
});

/** Deletes a folder on the server, a batch at a time (ConsoleAPI.swift), showing the progress. */
async function deleteFolder(folder, progress) {
  const result = { deleted: 0, refused: [] };
  $("deleting").hidden = false;
  let token = null;
  do {
    say("deleting-text", progress(result.deleted));
    try {
      const batch = await api.deleteFolderBatch(state.bucket, folder, token);
      result.deleted += batch.deleted.length;
      result.refused.push(...batch.refused);
      if (batch.unlisted) result.refused.push({ name: `${count(batch.unlisted, "object")} in folders under ${folder} that you may not list`, reason: "not deleted" });
      token = batch.nextPageToken || null;
    } catch (error) {
      result.refused.push({ name: folder, reason: words(error, { op: "delete", what: "this folder" }) });
      break;
    }
  } while (token);
  say("deleting-text", progress(result.deleted));
  return result;
}

function showRefused(refused) {
  $("refused-title").textContent = `Not deleted (${refused.length}):`;
  $("refused").replaceChildren(...refused.map((r) => el("li", { textContent: `${r.name}: ${r.reason}` })));
  $("refused-box").hidden = false;
}
$("refused-close").addEventListener("click", () => { $("refused-box").hidden = true; });

// New folder, new bucket: one dialog asking a name; `action` throws to keep it open with the refusal.
function askName({ title, label, hint, ok }, action) {
  $("name-title").textContent = title; $("name-label").textContent = label; $("name-hint").textContent = hint; $("name-ok").textContent = ok;
  $("name-input").value = ""; say("name-status", "");
  $("name-form").onsubmit = async (e) => {
    if (e.submitter?.value !== "ok") return;
    e.preventDefault();
    const value = $("name-input").value.trim();
    if (!value) return;
    try { await action(value); $("name-dialog").close(); } catch (error) { say("name-status", error.message, true); }
  };
  $("name-dialog").showModal();
}
$("new-folder").addEventListener("click", () => askName({ title: "New folder", label: `Folder name (in ${state.prefix || "the top of the bucket"})`, hint: "A folder is kept as an empty object named after it, ending in \"/\", as Google Cloud's console makes them.", ok: "Create" }, async (name) => {
  const folder = `${state.prefix}${name.replace(/^\/+|\/+$/g, "")}/`;
  try { await api.createFolder(state.bucket, folder); } catch (error) { throw new Error(words(error, { op: "create", what: folder })); }
  say("notice", `Created the folder ${folder}.`);
  load(true);
}));
$("new-bucket").addEventListener("click", () => askName({ title: "New bucket", label: "Bucket name", hint: "3 to 63 characters: lower-case letters, digits, '-', '_' and '.', starting and ending with a letter or digit. It is listed once something is written in it.", ok: "Create" }, async (name) => {
  try { await api.createBucket(name); } catch (error) { throw new Error(error.status === 400 || error.status === 409 ? `${error.serverMessage} (${error.status}).` : words(error, { op: "create", what: `the bucket ${name}` })); }
  if (!state.buckets.includes(name)) state.buckets = [...state.buckets, name].sort();
  say("notice", `Created the bucket ${name}: it is empty.`);
  openFolder(name, "");
}));

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
    text.textContent = `done${job.resumedAt ? ` (resumed at ${formatSize(job.resumedAt)})` : ""}`; bar.value = bar.max; finish("done"); reloadSoon();
  }).catch((error) => { if (error.cancelled) { text.textContent = "cancelled"; finish("cancelled"); } else finish("failed", words(error, { op: "upload", what: name })); }); };
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
  if (!state.bucket) { say("notice", "Choose a bucket before dropping files.", true); return; }
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
    showFacts(meta);
    $("meta-rows").replaceChildren(...Object.entries(meta.metadata || {}).map(([k, v]) => metaRow(k, v)));
    $("url").value = "";
    // On a narrow screen the panel is below the listing: it opens at its title.
    if (narrow()) $("panel").scrollIntoView({ block: "start" });
    $("panel").focus({ preventScroll: true });
    preview(meta);
  } catch (error) { say("status", words(error, { op: "read", what: name }), true); }
}

/** The panel's facts, from the object's metadata as the server last answered it. */
function showFacts(meta, dimensions = state.dimensions?.name === meta.name ? state.dimensions.text : null) {
  const facts = [["Declared type", meta.contentType], ["Detected type", meta.detectedContentType], ["Size", `${formatSize(meta.size)} (${meta.size} bytes)`], ...(dimensions ? [["Dimensions", dimensions]] : []), ["SHA-256", meta.sha256], ["MD5", meta.md5Hash || "computing…"], ["Generation", meta.generation], ["Metageneration", meta.metageneration], ["Created", meta.timeCreated], ["Updated", meta.updated], ["Cache-Control", meta.cacheControl || "—"], ["Content-Disposition", meta.contentDisposition || "—"], ["Content-Encoding", meta.contentEncoding || "—"], ["Content-Language", meta.contentLanguage || "—"]];
  $("facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", { textContent: k }), el("dd", { textContent: v ?? "—" })]));
}

// A metadata row is labelled by its key (as typed), so a screen reader reads "value of owner".
function metaRow(k = "", v = "") {
  const key = el("input", { value: k, className: "meta-key" }), value = el("input", { value: v, className: "meta-value" });
  const remove = el("button", { type: "button", textContent: "Remove" });
  const label = () => { const name = key.value.trim() || "a new key"; key.setAttribute("aria-label", `key ${name}`); value.setAttribute("aria-label", `value of ${name}`); remove.setAttribute("aria-label", `remove ${name}`); };
  key.addEventListener("input", label); label();
  const row = el("div", { className: "meta-row" }, key, value, remove);
  remove.onclick = () => row.remove();
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
  const kind = active || type.startsWith("text/") || type === "application/json" ? "text" : type.startsWith("image/") ? "image" : type.startsWith("video/") ? "video" : type.startsWith("audio/") ? "audio" : type === "application/pdf" ? "pdf" : null;
  if (!kind) { box.append(el("p", { className: "hint", textContent: `No preview for this type (${type || "unknown"}): download it to open it.` })); return; }
  if (Number(meta.size) > 20 * 1024 * 1024) { box.append(el("p", { className: "hint", textContent: `Too large to preview here (${formatSize(meta.size)}; previews go up to 20 MiB).` })); return; }
  try {
    const blob = await api.bytes(meta.bucket, meta.name);
    if (kind === "text") { box.append(el("pre", { textContent: (await blob.slice(0, 65536).text()) })); return; }
    previewURL = URL.createObjectURL(new Blob([blob], { type }));
    if (kind === "image") {
      const img = el("img", { src: previewURL, alt: `preview of ${meta.name}` });
      img.addEventListener("load", () => { state.dimensions = { name: meta.name, text: `${img.naturalWidth} × ${img.naturalHeight} px` }; if (state.current?.name === meta.name) showFacts(state.current); });
      box.append(img);
    }
    else if (kind === "pdf") box.append(el("iframe", { src: previewURL, title: `preview of ${meta.name}` }));
    else box.append(el(kind, { src: previewURL, controls: true, ariaLabel: `preview of ${meta.name}` }));
  } catch (error) { box.append(el("p", { className: "error", textContent: words(error, { op: "preview", what: meta.name }) })); }
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
  try { state.current = await api.patch(state.current.bucket, state.current.name, { metadata }); showFacts(state.current); say("panel-status", "Metadata saved."); } catch (error) { say("panel-status", words(error, { op: "change the metadata of", what: state.current.name }), true); }
});
// Download: the browser's own download (its progress, its folder) of the tokened URL; the
// `download` attribute names the file, as Content-Disposition: attachment would.
$("download").addEventListener("click", () => {
  const meta = state.current;
  if (!(meta.downloadTokens || "").split(",")[0]) { say("panel-status", "This object has no download token: rotate one first (Rotate token…).", true); return; }
  const a = el("a", { href: api.downloadURL(meta), download: meta.name.split("/").pop() });
  document.body.append(a); a.click(); a.remove();
  say("panel-status", `Downloading ${meta.name.split("/").pop()} (see the browser's downloads).`);
});
$("copy-url").addEventListener("click", async () => {
  const url = api.downloadURL(state.current); $("url").value = url; $("url").select();
  try { await navigator.clipboard.writeText(url); say("panel-status", "Download link copied: anyone who has it can download this object until the token is rotated."); } catch (_) { say("panel-status", "Download link selected: copy it with Ctrl+C."); }
});
$("rotate").addEventListener("click", () => confirmThen(`Rotate the download token of ${state.current.name}? Every download link made with the current token stops working.`, async () => {
  try { state.current = await api.patch(state.current.bucket, state.current.name, { rotateDownloadToken: true }); showFacts(state.current); $("url").value = api.downloadURL(state.current); say("panel-status", "Token rotated: the old download link no longer works."); } catch (error) { say("panel-status", words(error, { op: "rotate the token of", what: state.current.name }), true); }
}, "Rotate"));

// Share links (admin identities): a V4 signed URL made in the page with a service account's key file.
let shareKey = null;
$("share").addEventListener("click", () => { say("share-status", shareKey ? `Signing as ${shareKey.client_email}.` : ""); $("share-dialog").showModal(); });
$("share-key").addEventListener("change", async () => {
  try {
    const key = JSON.parse(await $("share-key").files[0].text());
    if (!key.client_email || !key.private_key) throw new Error("not a service account key file (no client_email or private_key)");
    shareKey = key; say("share-status", `Signing as ${key.client_email}.`);
  } catch (error) { shareKey = null; say("share-status", `That file cannot sign: ${error.message}.`, true); }
});
$("share-form").addEventListener("submit", async (e) => {
  if (e.submitter?.value !== "ok") return;
  e.preventDefault();
  const seconds = Math.round(Number($("share-amount").value) * Number($("share-unit").value));
  if (!shareKey) { say("share-status", "Choose a service account's key file first.", true); return; }
  if (!(seconds >= 1 && seconds <= 604800)) { say("share-status", "A share link lasts from 1 second to 7 days.", true); return; }
  try {
    const url = await api.signedURL(shareKey, state.current.bucket, state.current.name, seconds);
    $("url").value = url;
    $("share-dialog").close();
    $("url").select();
    const until = new Date(Date.now() + seconds * 1000).toLocaleString();
    try { await navigator.clipboard.writeText(url); say("panel-status", `Share link copied: it works until ${until}.`); } catch (_) { say("panel-status", `Share link made (works until ${until}): copy it with Ctrl+C.`); }
  } catch (error) { say("share-status", error.message, true); }
});
$("delete").addEventListener("click", () => confirmThen(`Delete ${state.current.name}? This cannot be undone.`, async () => {
  try { await api.remove(state.current.bucket, state.current.name); $("panel").hidden = true; say("notice", `Deleted ${state.current.name}.`); load(true); $("filter").focus(); } catch (error) { say("panel-status", words(error, { op: "delete", what: state.current.name }), true); }
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
  } catch (error) {
    // The copy refused because the name is taken (ifGenerationMatch=0); a refused delete says itself.
    say("rename-status", error.status === 412 && !error.message.startsWith("copied to") ? `An object named ${target} already exists: choose another name (or delete that one first).` : error.message.startsWith("copied to") ? error.message : words(error, { op: "rename", what: state.current.name }), true);
  }
});

// The store view: counts from /admin/v1/store, which only admin identities may read.
$("open-store").addEventListener("click", async () => {
  $("store").hidden = false; if (narrow()) $("store").scrollIntoView({ block: "start" }); $("store").focus({ preventScroll: true }); say("store-status", "Loading…");
  try {
    const s = await api.store();
    const rows = [["Objects", s.objects], ["Logical bytes (sum of object sizes)", `${formatSize(s.logicalBytes)} (${s.logicalBytes})`], ["Stored bytes (distinct blobs)", `${formatSize(s.storedBytes)} (${s.storedBytes})`], ["Saved by deduplication", formatSize(s.dedupSavedBytes)], ["Blobs", s.blobs], ["Collectable blobs", s.collectable.blobs], ["Collectable bytes", `${formatSize(s.collectable.bytes)} (${s.collectable.bytes})`], ["Uploads in progress", `${s.uploadsInProgress.count} (${formatSize(s.uploadsInProgress.bytes)} received)`], ["Last gc", s.lastGC ? `${new Date(s.lastGC.finishedAt).toLocaleString()}: ${count(s.lastGC.blobsRemoved, "blob")}, ${formatSize(s.lastGC.bytesFreed)} freed` : "never"]];
    $("store-facts").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { textContent: k }), el("dd", { textContent: String(v) })]));
    // Per bucket: its objects and their bytes, beside the totals above.
    const buckets = s.buckets || [];
    $("store-buckets").querySelector("tbody").replaceChildren(...(buckets.length ? buckets.map((b) => el("tr", { dataset: { bucket: b.name } },
      el("th", { scope: "row", textContent: b.name }), el("td", { className: "objects", textContent: String(b.objectCount) }),
      el("td", { className: "bytes", textContent: `${formatSize(b.logicalBytes)} (${b.logicalBytes})` }),
      el("td", { className: "share", textContent: s.logicalBytes ? `${Math.round((100 * b.logicalBytes) / s.logicalBytes)} %` : "—" }))) : [el("tr", {}, el("td", { colSpan: 4, textContent: "No bucket holds objects yet." }))]));
    // Each webhook subscription's backlog: what waits, how long the oldest has, what was given up.
    const subscriptions = s.eventSubscriptions || [];
    $("store-events").querySelector("tbody").replaceChildren(...(subscriptions.length ? subscriptions.map((e) => el("tr", { dataset: { subscription: e.id }, className: e.dead ? "has-dead" : "" },
      el("td", {}, el("span", { className: "sub-id", textContent: e.id }), el("span", { className: "sub-target", textContent: `${e.bucket} → ${e.url}` })),
      el("td", { className: "pending", textContent: String(e.pending) }),
      el("td", { className: "lag", textContent: e.pending ? formatTime(e.lagSeconds) : "—" }),
      el("td", { className: "dead", textContent: String(e.dead) }))) : [el("tr", {}, el("td", { colSpan: 4, textContent: "No webhook subscriptions." }))]));
    say("store-status", "");
  } catch (error) { $("store-facts").replaceChildren(); $("store-buckets").querySelector("tbody").replaceChildren(); $("store-events").querySelector("tbody").replaceChildren(); say("store-status", words(error, { op: "read", what: "the store's counts" }), true); }
});
const closeStore = () => { $("store").hidden = true; $("open-store").focus(); };
$("close-store").addEventListener("click", closeStore);

// Escape closes the topmost panel (dialogs close themselves on Escape).
addEventListener("keydown", (e) => {
  if (e.key !== "Escape" || document.querySelector("dialog[open]")) return;
  if (!$("panel").hidden) closePanel(); else if (!$("store").hidden) closeStore();
});

start();
