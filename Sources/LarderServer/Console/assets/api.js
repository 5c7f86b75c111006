// The public HTTP API with the signed-in user's token, and the console's two calls of its own
// (sign-in check, folder delete: ConsoleAPI.swift), under the same token and rules.
const TOKEN_KEY = "larder.token";

export function token() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(value) { value ? sessionStorage.setItem(TOKEN_KEY, value) : sessionStorage.removeItem(TOKEN_KEY); }

export const enc = encodeURIComponent;
export function objectPath(bucket, name) { return `/v0/b/${enc(bucket)}/o/${enc(name)}`; }

/** The server's own message in a refusal's JSON body (its status text otherwise). */
async function serverMessage(response) {
  try { const body = await response.json(); if (body.error && body.error.message) return body.error.message; } catch (_) { /* not JSON */ }
  return response.statusText || "refused";
}

/** An Error for a refusal, carrying its status and the server's message. */
function refusalError(status, message) { return Object.assign(new Error(`${status}: ${message}`), { status, serverMessage: message }); }

/** The server's refusal as an Error; a 401 also tells the console to sign in again. */
export async function failure(response) { return refused(response.status, await serverMessage(response)); }

function refused(status, message) {
  const error = refusalError(status, message);
  // A token refused after sign-in (expired, revoked key): the console goes back to sign-in.
  if (status === 401) for (const listener of unauthorized) listener(error);
  return error;
}

const unauthorized = new Set();
/** `listener(error)` runs on every 401 answer, whatever asked. */
export function onUnauthorized(listener) { unauthorized.add(listener); }

export async function call(path, init = {}) {
  const headers = new Headers(init.headers || {});
  if (token()) headers.set("Authorization", `Bearer ${token()}`);
  const response = await fetch(path, { ...init, headers });
  if (!response.ok) throw await failure(response);
  return response;
}

export async function json(path, init) { const r = await call(path, init); return r.status === 204 ? null : r.json(); }

/** The sign-in check: who `candidate` is, or a 401 saying why not (checked without keeping it). */
export async function session(candidate) {
  const r = await fetch("/console/v1/session", { headers: { Authorization: `Bearer ${candidate}` } });
  if (!r.ok) throw refusalError(r.status, await serverMessage(r));
  return r.json();
}

/** A bucket made by an admin identity (GCS buckets.insert: the name checked, 409 if it exists). */
export function createBucket(name) {
  return json("/storage/v1/b?project=larder", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name }) });
}

/** A folder: a zero-byte object named `prefix + name + "/"`, as the GCS console makes them. */
export function createFolder(bucket, folder) {
  return json(`/v0/b/${enc(bucket)}/o?name=${enc(folder)}`, { method: "POST", headers: { "Content-Type": "application/x-directory" }, body: new Uint8Array(0) });
}

/** One batch of a server-side folder delete (see ConsoleAPI.swift): {deleted, refused, unlisted, nextPageToken}. */
export function deleteFolderBatch(bucket, prefix, pageToken) {
  const q = new URLSearchParams({ prefix });
  if (pageToken) q.set("pageToken", pageToken);
  return json(`/console/v1/b/${enc(bucket)}/deleteFolder?${q}`, { method: "POST" });
}

export function buckets() { return json("/storage/v1/b?project=larder"); }

/** One page of a folder: GCS JSON listing (full resources: size, updated, types). */
export function list(bucket, prefix, pageToken, maxResults = 200) {
  const q = new URLSearchParams({ prefix, delimiter: "/", maxResults: String(maxResults) });
  if (pageToken) q.set("pageToken", pageToken);
  return json(`/storage/v1/b/${enc(bucket)}/o?${q}`);
}

export function metadata(bucket, name) { return json(objectPath(bucket, name)); }
export function patch(bucket, name, body) {
  return json(objectPath(bucket, name), { method: "PATCH", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}
export function remove(bucket, name) { return call(objectPath(bucket, name), { method: "DELETE" }); }
export async function bytes(bucket, name) { return (await call(`${objectPath(bucket, name)}?alt=media`)).blob(); }

/** A thumbnail: the server's image variant of the object (libvips), fetched with the token. */
export async function thumbnail(bucket, name, size) {
  return (await call(`${objectPath(bucket, name)}?alt=media&width=${size}&height=${size}&resize=cover&format=webp`)).blob();
}

const gcsObject = (bucket, name) => `/storage/v1/b/${enc(bucket)}/o/${enc(name)}`;

/**
 * Renames (or moves) an object: the GCS API's copyTo (no bytes copied: content is addressed),
 * refused if the new name exists, then a delete of the old name pinned to the generation copied.
 * Two calls, so not atomic: if the delete is refused, both names exist and the error says so.
 */
export async function rename(bucket, name, generation, newName) {
  await json(`${gcsObject(bucket, name)}/copyTo/b/${enc(bucket)}/o/${enc(newName)}?ifGenerationMatch=0&ifSourceGenerationMatch=${generation}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
  try { await call(`${gcsObject(bucket, name)}?ifGenerationMatch=${generation}`, { method: "DELETE" }); } catch (error) {
    error.message = `copied to ${newName}, but the old name was not deleted (${error.message}): both exist now`; throw error;
  }
}

/** The store's counts (admin identities only: a service account's access token). */
export function store() { return json("/admin/v1/store"); }

/**
 * A V4 signed URL (GOOG4-RSA-SHA256) for GET of the object, made in the browser with a service
 * account's key file (`key`: its parsed JSON); the key never leaves the page. WebCrypto needs a
 * secure context (HTTPS, or the console on localhost/127.0.0.1).
 */
export async function signedURL(key, bucket, name, seconds) {
  if (!crypto.subtle) throw new Error("share links are signed by the browser's WebCrypto, which needs the console over HTTPS or on localhost");
  const q3986 = (text, keepSlashes) => [...new TextEncoder().encode(text)].map((b) => {
    const c = String.fromCharCode(b);
    return /[A-Za-z0-9\-._~]/.test(c) || (keepSlashes && c === "/") ? c : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }).join("");
  const now = new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+/, "");  // 20261206T051500Z
  const scope = `${now.slice(0, 8)}/auto/storage/goog4_request`;
  const query = [["X-Goog-Algorithm", "GOOG4-RSA-SHA256"], ["X-Goog-Credential", `${key.client_email}/${scope}`], ["X-Goog-Date", now],
    ["X-Goog-Expires", String(seconds)], ["X-Goog-SignedHeaders", "host"]].map(([k, v]) => `${q3986(k)}=${q3986(v)}`).sort().join("&");
  const path = q3986(`/${bucket}/${name}`, true);
  const canonical = ["GET", path, query, `host:${location.host}`, "", "host", "UNSIGNED-PAYLOAD"].join("\n");
  const hex = (buffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const toSign = ["GOOG4-RSA-SHA256", now, scope, hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonical)))].join("\n");
  const der = Uint8Array.from(atob(key.private_key.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  const signer = await crypto.subtle.importKey("pkcs8", der, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["sign"]);
  const signature = hex(await crypto.subtle.sign("RSASSA-PKCS1-v1_5", signer, new TextEncoder().encode(toSign)));
  return `${location.origin}${path}?${query}&X-Goog-Signature=${signature}`;
}

export function downloadURL(meta) {
  const t = (meta.downloadTokens || "").split(",")[0];
  return `${location.origin}${objectPath(meta.bucket, meta.name)}?alt=media${t ? `&token=${enc(t)}` : ""}`;
}

// tus 1.0.0 resumable uploads, with XMLHttpRequest for upload progress.
const CHUNK = 1 << 20;
const b64 = (s) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));
const uploadKey = (bucket, name, file) => `larder.upload:${bucket}:${name}:${file.size}:${file.lastModified}`;

function xhr(method, url, headers, body, onProgress, owner) {
  return new Promise((resolve, reject) => {
    const r = new XMLHttpRequest();
    if (owner) owner.request = r;
    r.open(method, url);
    for (const [k, v] of Object.entries(headers)) r.setRequestHeader(k, v);
    if (token()) r.setRequestHeader("Authorization", `Bearer ${token()}`);
    if (onProgress) r.upload.onprogress = (e) => onProgress(e.loaded);
    r.onload = () => resolve(r);
    r.onerror = () => reject(new Error("network error"));
    r.onabort = () => reject(Object.assign(new Error("cancelled"), { cancelled: true }));
    r.send(body);
  });
}

async function refusal(r) {
  let message = r.statusText || "refused";
  try { const body = JSON.parse(r.responseText); if (body.error && body.error.message) message = body.error.message; } catch (_) { /* not JSON */ }
  return refused(r.status, message);
}

/** tus termination. The PATCH just aborted may hold the upload on the server a moment longer
 * (423 Locked, until the server sees its connection close): asks again, backing off, for up to
 * about 20 s; any other answer (or none) ends it. */
async function terminate(url) {
  for (let attempt = 0, delay = 100; attempt < 14; attempt++, delay = Math.min(delay * 2, 2000)) {
    const r = await xhr("DELETE", url, { "Tus-Resumable": "1.0.0" }).catch(() => null);
    if (!r || r.status !== 423) return;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** Uploads `file` as `name`, resuming an earlier upload of the same file (kept in localStorage). */
export class Upload {
  constructor(bucket, name, file, onProgress) { Object.assign(this, { bucket, name, file, onProgress, paused: false, cancelled: false, resumedAt: 0, url: null, request: null }); }

  /** Stops the upload and ends it on the server (tus termination); its bytes are dropped. */
  async cancel() {
    this.cancelled = true;
    this.request?.abort();
    localStorage.removeItem(uploadKey(this.bucket, this.name, this.file));
    if (this.url) await terminate(this.url);
  }

  async start() {
    const key = uploadKey(this.bucket, this.name, this.file);
    let url = localStorage.getItem(key), offset = 0;
    if (url) {
      const r = await xhr("HEAD", url, { "Tus-Resumable": "1.0.0" });
      if (r.status === 200) { offset = Number(r.getResponseHeader("Upload-Offset")); this.resumedAt = offset; } else url = null;
    }
    if (!url) {
      const meta = `name ${b64(this.name)},contentType ${b64(this.file.type || "application/octet-stream")},filename ${b64(this.file.name)}`;
      const r = await xhr("POST", `/v0/b/${enc(this.bucket)}/uploads`, { "Tus-Resumable": "1.0.0", "Upload-Length": String(this.file.size), "Upload-Metadata": meta });
      if (r.status !== 201) throw await refusal(r);
      url = new URL(r.getResponseHeader("Location"), location.href).href;
      localStorage.setItem(key, url);
    }
    this.url = url;
    this.onProgress(offset);
    while (offset < this.file.size) {
      if (this.cancelled) throw Object.assign(new Error("cancelled"), { cancelled: true });
      if (this.paused) return "paused";
      const chunk = this.file.slice(offset, offset + CHUNK);
      const r = await xhr("PATCH", url, { "Tus-Resumable": "1.0.0", "Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream" }, chunk, (n) => this.onProgress(offset + n), this);
      if (r.status !== 204) throw await refusal(r);
      offset = Number(r.getResponseHeader("Upload-Offset"));
      this.onProgress(offset);
    }
    if (this.file.size === 0 && !localStorage.getItem(key)) return "done";
    localStorage.removeItem(key);
    return "done";
  }
}
