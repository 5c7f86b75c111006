// Drives the real Firebase JS SDK (bundled: $LARDER_CLIENTS/firebase-js-sdk) against a running
// `larder serve`. Usage: node sdk_checks.cjs SCENARIO  (env: LARDER_PORT, LARDER_SDK, LARDER_TOKEN_*)
// Every check compares exact bytes or fields; the last stdout line is a JSON report
// {"scenario", "checks", "failures": [...]}, which interop/test_firebase_sdk.py asserts on.
"use strict";
const assert = require("node:assert");
const crypto = require("node:crypto");
const fb = require(process.env.LARDER_SDK);

const port = Number(process.env.LARDER_PORT);
const bucket = process.env.LARDER_BUCKET || "app";
let checks = 0;
const failures = [];

function check(label, actual, expected) {
  checks++;
  try {
    assert.deepStrictEqual(actual, expected);
  } catch (e) {
    failures.push({ label, actual: String(JSON.stringify(actual)).slice(0, 300), expected: String(JSON.stringify(expected)).slice(0, 300) });
  }
}

async function expectError(label, promise, code) {
  checks++;
  try {
    await promise;
    failures.push({ label, actual: "no error", expected: code });
  } catch (e) {
    if (e.code !== code) failures.push({ label, actual: `${e.code}: ${e.message}`.slice(0, 300), expected: code });
  }
}

function storageFor(name, token) {
  const app = fb.initializeApp({ projectId: "demo", storageBucket: bucket, apiKey: "x" }, name);
  const storage = fb.getStorage(app);
  fb.connectStorageEmulator(storage, "127.0.0.1", port, token ? { mockUserToken: token } : {});
  return storage;
}

const sha256 = (bytes) => crypto.createHash("sha256").update(bytes).digest("hex");
const md5b64 = (bytes) => crypto.createHash("md5").update(bytes).digest("base64");
const seeded = (size, seed) => {
  // Deterministic bytes (so a failure is reproducible), fast: SHA-256 in counter mode.
  const out = Buffer.alloc(size);
  for (let i = 0, block = 0; i < size; block++) {
    const h = crypto.createHash("sha256").update(`${seed}:${block}`).digest();
    i += h.copy(out, i);
  }
  return out;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function streamToBuffer(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

/// Runs an upload task, recording progress; returns {snapshot, events}.
async function runTask(task, onProgress) {
  const events = [];
  task.on("state_changed", (s) => {
    events.push({ transferred: s.bytesTransferred, total: s.totalBytes, state: s.state });
    if (onProgress) onProgress(s, task);
  });
  const snapshot = await task;
  return { snapshot, events };
}

function checkProgress(label, events, total) {
  const running = events.filter((e) => e.state === "running");
  check(`${label}: several progress events`, running.length > 2, true);
  check(`${label}: totals`, [...new Set(events.map((e) => e.total))], [total]);
  let monotonic = true;
  for (let i = 1; i < events.length; i++) if (events[i].transferred < events[i - 1].transferred) monotonic = false;
  check(`${label}: progress never goes back`, monotonic, true);
  check(`${label}: last event is complete`, events[events.length - 1].transferred, total);
}

const scenarios = {
  async uploads() {
    const st = storageFor("uploads");
    const bytes = seeded(10_000, "ub");
    const r = fb.ref(st, "sdk/bytes.bin");
    const meta = {
      contentType: "application/x-larder-test", cacheControl: "public, max-age=30",
      contentDisposition: 'attachment; filename="b.bin"', customMetadata: { Owner: "Ada", camelCase: "Yes", "lower-key": "v" },
    };
    const up = await fb.uploadBytes(r, bytes, meta);
    check("uploadBytes: size", up.metadata.size, bytes.length);
    check("uploadBytes: md5Hash", up.metadata.md5Hash, md5b64(bytes));
    check("uploadBytes: fullPath", up.metadata.fullPath, "sdk/bytes.bin");
    check("uploadBytes: name", up.metadata.name, "bytes.bin");
    check("uploadBytes: bucket", up.metadata.bucket, bucket);
    check("uploadBytes: customMetadata keeps case", up.metadata.customMetadata, meta.customMetadata);
    check("uploadBytes: cacheControl", up.metadata.cacheControl, meta.cacheControl);
    check("uploadBytes: contentDisposition", up.metadata.contentDisposition, meta.contentDisposition);
    check("uploadBytes: contentType is the declared one", up.metadata.contentType, meta.contentType);
    check("uploadBytes: bytes", Buffer.from(await fb.getBytes(r)).equals(bytes), true);
    const got = await fb.getMetadata(r);
    for (const k of ["size", "md5Hash", "fullPath", "name", "bucket", "customMetadata", "cacheControl", "contentDisposition", "generation", "metageneration", "timeCreated", "updated"]) {
      check(`getMetadata: ${k} as uploadBytes answered`, got[k], up.metadata[k]);
    }

    const text = "héllo, wörld ✓ 🚀\n";
    const raw = await fb.uploadString(fb.ref(st, "sdk/raw.txt"), text);
    check("uploadString raw: size", raw.metadata.size, Buffer.byteLength(text));
    check("uploadString raw: bytes", Buffer.from(await fb.getBytes(raw.ref)).toString("utf8"), text);

    const b64bytes = seeded(777, "b64");
    const b64 = await fb.uploadString(fb.ref(st, "sdk/b64.bin"), b64bytes.toString("base64"), "base64");
    check("uploadString base64: bytes", Buffer.from(await fb.getBytes(b64.ref)).equals(b64bytes), true);
    const b64u = await fb.uploadString(fb.ref(st, "sdk/b64url.bin"), b64bytes.toString("base64url"), "base64url");
    check("uploadString base64url: bytes", Buffer.from(await fb.getBytes(b64u.ref)).equals(b64bytes), true);

    const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "base64");
    const dataURL = "data:image/png;base64," + png.toString("base64");
    const du = await fb.uploadString(fb.ref(st, "sdk/pixel.png"), dataURL, "data_url");
    check("uploadString data_url: bytes", Buffer.from(await fb.getBytes(du.ref)).equals(png), true);
    check("uploadString data_url: contentType", du.metadata.contentType, "image/png");
    const textURL = "data:text/plain;charset=utf-8," + encodeURIComponent(text);
    const dt = await fb.uploadString(fb.ref(st, "sdk/data.txt"), textURL, "data_url");
    check("uploadString data_url (percent-encoded): bytes", Buffer.from(await fb.getBytes(dt.ref)).toString("utf8"), text);

    const empty = await fb.uploadBytes(fb.ref(st, "sdk/empty"), new Uint8Array(0));
    check("uploadBytes empty: size", empty.metadata.size, 0);
    check("uploadBytes empty: bytes", (await fb.getBytes(empty.ref)).byteLength, 0);
  },

  async resumable() {
    const st = storageFor("resumable");
    for (const [label, size] of [["3 MiB", 3 << 20], ["20 MiB", 20 << 20]]) {
      const bytes = seeded(size, label);
      const r = fb.ref(st, `sdk/resumable-${size}.bin`);
      const { snapshot, events } = await runTask(fb.uploadBytesResumable(r, bytes, { customMetadata: { Label: label } }));
      checkProgress(`uploadBytesResumable ${label}`, events, size);
      check(`uploadBytesResumable ${label}: state`, snapshot.state, "success");
      check(`uploadBytesResumable ${label}: size`, snapshot.metadata.size, size);
      check(`uploadBytesResumable ${label}: md5Hash`, snapshot.metadata.md5Hash, md5b64(bytes));
      check(`uploadBytesResumable ${label}: customMetadata`, snapshot.metadata.customMetadata, { Label: label });
      check(`uploadBytesResumable ${label}: sha256 of getBytes`, sha256(Buffer.from(await fb.getBytes(r))), sha256(bytes));
    }
    // A small resumable task goes multipart (≤ 256 KiB): still exact.
    const small = seeded(1000, "small");
    const { snapshot } = await runTask(fb.uploadBytesResumable(fb.ref(st, "sdk/small-resumable.bin"), small));
    check("uploadBytesResumable 1000 B: bytes", Buffer.from(await fb.getBytes(snapshot.ref)).equals(small), true);
  },

  async pauseResume() {
    const st = storageFor("pause");
    const size = 20 << 20;
    const bytes = seeded(size, "pause");
    const r = fb.ref(st, "sdk/paused.bin");
    const task = fb.uploadBytesResumable(r, bytes);
    let paused = false;
    let pausedAt = -1;
    let eventsWhilePaused = 0;
    const states = [];
    const done = runTask(task, (s, t) => {
      states.push(s.state);
      if (!paused && s.bytesTransferred > 0 && s.state === "running") {
        paused = true;
        check("pause() accepted", t.pause(), true);
      }
    });
    while (!states.includes("paused")) await sleep(20);
    pausedAt = task.snapshot.bytesTransferred;
    const before = states.length;
    await sleep(1500);
    eventsWhilePaused = states.length - before;
    check("no progress while paused", [eventsWhilePaused, task.snapshot.bytesTransferred], [0, pausedAt]);
    check("paused before the end", pausedAt < size, true);
    check("resume() accepted", task.resume(), true);
    const { snapshot, events } = await done;
    check("paused task completes", snapshot.state, "success");
    check("paused task: states seen", ["running", "paused"].every((s) => states.includes(s)), true);
    check("paused task: last event", events[events.length - 1].transferred, size);
    check("paused task: sha256", sha256(Buffer.from(await fb.getBytes(r))), sha256(bytes));
  },

  async cancel() {
    const st = storageFor("cancel");
    const bytes = seeded(20 << 20, "cancel");
    const r = fb.ref(st, "sdk/canceled.bin");
    const task = fb.uploadBytesResumable(r, bytes);
    let canceled = false;
    task.on("state_changed", (s) => {
      if (!canceled && s.bytesTransferred > 0) {
        canceled = true;
        check("cancel() accepted", task.cancel(), true);
      }
    });
    await expectError("cancel(): the task rejects", task, "storage/canceled");
    check("cancel(): final state", task.snapshot.state, "canceled");
    await expectError("cancel(): nothing stored", fb.getMetadata(r), "storage/object-not-found");
  },

  /// Prints PROGRESS lines; the test kills and restarts the server meanwhile.
  async restart() {
    const st = storageFor("restart");
    const size = 20 << 20;
    const bytes = seeded(size, "restart");
    const r = fb.ref(st, "sdk/restarted.bin");
    const { snapshot, events } = await runTask(fb.uploadBytesResumable(r, bytes), (s) => {
      process.stdout.write(`PROGRESS ${s.bytesTransferred}\n`);
    });
    check("restart: task completes", snapshot.state, "success");
    check("restart: size", snapshot.metadata.size, size);
    check("restart: md5Hash", snapshot.metadata.md5Hash, md5b64(bytes));
    check("restart: last event", events[events.length - 1].transferred, size);
    check("restart: sha256", sha256(Buffer.from(await fb.getBytes(r))), sha256(bytes));
  },

  async reads() {
    const st = storageFor("reads");
    const bytes = seeded(300_000, "reads");
    const r = fb.ref(st, "sdk/read.bin");
    await fb.uploadBytes(r, bytes, { contentType: "application/octet-stream" });
    const meta = await fb.getMetadata(r);
    check("getMetadata: size", meta.size, bytes.length);
    check("getMetadata: md5Hash", meta.md5Hash, md5b64(bytes));
    check("getMetadata: fullPath", meta.fullPath, "sdk/read.bin");
    const url = await fb.getDownloadURL(r);
    check("getDownloadURL: shape", url.startsWith(`http://127.0.0.1:${port}/v0/b/${bucket}/o/sdk%2Fread.bin?alt=media&token=`), true);
    const fetched = await fetch(url);
    check("getDownloadURL + fetch: status", fetched.status, 200);
    check("getDownloadURL + fetch: bytes", Buffer.from(await fetched.arrayBuffer()).equals(bytes), true);
    check("getBytes: bytes", Buffer.from(await fb.getBytes(r)).equals(bytes), true);
    check("getBytes(max 1000): first 1000 bytes", Buffer.from(await fb.getBytes(r, 1000)).equals(bytes.subarray(0, 1000)), true);
    check("getBytes(max ≥ size): all", Buffer.from(await fb.getBytes(r, bytes.length + 5)).equals(bytes), true);
    check("getStream: bytes", (await streamToBuffer(fb.getStream(r))).equals(bytes), true);
    check("getStream(max 4096): first 4096 bytes", (await streamToBuffer(fb.getStream(r, 4096))).equals(bytes.subarray(0, 4096)), true);
    await expectError("getBytes of a missing object", fb.getBytes(fb.ref(st, "sdk/missing")), "storage/object-not-found");
    await expectError("getMetadata of a missing object", fb.getMetadata(fb.ref(st, "sdk/missing")), "storage/object-not-found");
  },

  async listing() {
    const st = storageFor("listing");
    const names = ["list/a.txt", "list/b.txt", "list/c.txt", "list/d.txt", "list/e.txt", "list/sub/x.txt", "list/sub2/y/z.txt"];
    for (const n of names) await fb.uploadString(fb.ref(st, n), n);
    const folder = fb.ref(st, "list");
    const all = await fb.listAll(folder);
    check("listAll: items", all.items.map((i) => i.fullPath), names.filter((n) => n.split("/").length === 2));
    check("listAll: prefixes", all.prefixes.map((p) => p.fullPath), ["list/sub", "list/sub2"]);
    const seen = [];
    const pages = [];
    let pageToken;
    do {
      const page = await fb.list(folder, { maxResults: 2, pageToken });
      pages.push(page.items.length + page.prefixes.length);
      seen.push(...page.items.map((i) => i.fullPath), ...page.prefixes.map((p) => p.fullPath + "/"));
      pageToken = page.nextPageToken;
    } while (pageToken);
    check("list(maxResults 2): every page ≤ 2", pages.every((n) => n <= 2), true);
    check("list(maxResults 2): pages", pages.length >= 3, true);
    check("list(maxResults 2)+pageToken: all entries once", [...seen].sort(), ["list/a.txt", "list/b.txt", "list/c.txt", "list/d.txt", "list/e.txt", "list/sub/", "list/sub2/"]);
    const sub = await fb.listAll(fb.ref(st, "list/sub2/y"));
    check("listAll deeper: items", sub.items.map((i) => i.fullPath), ["list/sub2/y/z.txt"]);
    await fb.deleteObject(fb.ref(st, "list/c.txt"));
    await expectError("deleteObject: gone", fb.getMetadata(fb.ref(st, "list/c.txt")), "storage/object-not-found");
    check("deleteObject: not listed", (await fb.listAll(folder)).items.map((i) => i.fullPath), ["list/a.txt", "list/b.txt", "list/d.txt", "list/e.txt"]);
    await expectError("deleteObject of a missing object", fb.deleteObject(fb.ref(st, "list/c.txt")), "storage/object-not-found");
  },

  async names() {
    const st = storageFor("names");
    const names = ["names/with space.txt", "names/ünïcödé 名前 🚀.txt", "names/#?&=+%.txt", "names/deep/a/b/c.txt", "names/100% sure?.txt", "names/a+b=c&d.txt"];
    for (const [i, name] of names.entries()) {
      const bytes = seeded(2000 + i, name);
      const r = fb.ref(st, name);
      const up = await fb.uploadBytes(r, bytes);
      check(`${name}: fullPath`, up.metadata.fullPath, name);
      check(`${name}: getBytes`, Buffer.from(await fb.getBytes(r)).equals(bytes), true);
      check(`${name}: getMetadata fullPath`, (await fb.getMetadata(r)).fullPath, name);
      const res = await fetch(await fb.getDownloadURL(r));
      check(`${name}: download URL bytes`, Buffer.from(await res.arrayBuffer()).equals(bytes), true);
      const big = seeded(300 * 1024, name);
      const { snapshot } = await runTask(fb.uploadBytesResumable(fb.ref(st, name + ".big"), big));
      check(`${name}: resumable fullPath`, snapshot.metadata.fullPath, name + ".big");
      check(`${name}: resumable bytes`, sha256(Buffer.from(await fb.getBytes(snapshot.ref))), sha256(big));
    }
    const listed = await fb.listAll(fb.ref(st, "names"));
    const expected = names.filter((n) => n.split("/").length === 2).flatMap((n) => [n, n + ".big"]).sort();
    check("names: listed", listed.items.map((i) => i.fullPath).sort(), expected);
    check("names: prefixes", listed.prefixes.map((p) => p.fullPath), ["names/deep"]);
    for (const name of names) {
      await fb.deleteObject(fb.ref(st, name));
      await expectError(`${name}: deleted`, fb.getMetadata(fb.ref(st, name)), "storage/object-not-found");
    }
  },

  /// All of it needs part 3 (PATCH takes every writable field the SDK sends, and ignores the
  /// read-only ones it echoes back).
  async updateMetadata() {
    const st = storageFor("update");
    const r = fb.ref(st, "sdk/update.txt");
    await fb.uploadString(r, "update me", "raw", { contentType: "text/plain", customMetadata: { Keep: "1", Drop: "2" } });
    const set = {
      contentType: "text/x-larder", cacheControl: "public, max-age=9", contentDisposition: "inline",
      contentEncoding: "identity", contentLanguage: "fr", customMetadata: { Drop: null, Added: "3" },
    };
    const after = await fb.updateMetadata(r, set);
    for (const k of ["contentType", "cacheControl", "contentDisposition", "contentEncoding", "contentLanguage"]) {
      check(`updateMetadata sets ${k}`, after[k], set[k]);
    }
    check("updateMetadata: customMetadata merged, null removes", after.customMetadata, { Keep: "1", Added: "3" });
    check("updateMetadata: metageneration", after.metageneration, "2");
    const cleared = await fb.updateMetadata(r, {
      contentType: null, cacheControl: null, contentDisposition: null, contentLanguage: null, customMetadata: null,
    });
    check("updateMetadata: contentType null resets", cleared.contentType, "application/octet-stream");
    for (const k of ["cacheControl", "contentDisposition", "contentLanguage"]) {
      check(`updateMetadata: ${k} null clears`, cleared[k], undefined);
    }
    check("updateMetadata: customMetadata null clears", cleared.customMetadata, undefined);
    check("getMetadata agrees", (await fb.getMetadata(r)).metageneration, cleared.metageneration);
    check("bytes unchanged", Buffer.from(await fb.getBytes(r)).toString(), "update me");
  },

  async auth() {
    const alice = storageFor("alice", process.env.LARDER_TOKEN_ALICE);
    const alice2 = storageFor("alice2", process.env.LARDER_TOKEN_ALICE2);
    const bob = storageFor("bob", process.env.LARDER_TOKEN_BOB);
    const anon = storageFor("anon");
    const forged = storageFor("forged", process.env.LARDER_TOKEN_FORGED);
    const bytes = seeded(5000, "auth");
    const path = "users/alice/private.bin";
    const up = await fb.uploadBytes(fb.ref(alice, path), bytes);
    check("owner uploadBytes", up.metadata.size, bytes.length);
    const big = seeded(3 << 20, "auth-big");
    const { snapshot } = await runTask(fb.uploadBytesResumable(fb.ref(alice, "users/alice/big.bin"), big));
    check("owner uploadBytesResumable", snapshot.metadata.md5Hash, md5b64(big));
    check("owner reads with another token of the same uid", Buffer.from(await fb.getBytes(fb.ref(alice2, path))).equals(bytes), true);
    for (const [who, st] of [["bob", bob], ["anonymous", anon]]) {
      await expectError(`${who}: uploadBytes → 403`, fb.uploadBytes(fb.ref(st, path), bytes), "storage/unauthorized");
      await expectError(`${who}: uploadBytesResumable → 403`, fb.uploadBytesResumable(fb.ref(st, "users/alice/b2.bin"), big), "storage/unauthorized");
      await expectError(`${who}: getBytes → 403`, fb.getBytes(fb.ref(st, path)), "storage/unauthorized");
      await expectError(`${who}: getMetadata → 403`, fb.getMetadata(fb.ref(st, path)), "storage/unauthorized");
      await expectError(`${who}: deleteObject → 403`, fb.deleteObject(fb.ref(st, path)), "storage/unauthorized");
      await expectError(`${who}: listAll → 403`, fb.listAll(fb.ref(st, "users/alice")), "storage/unauthorized");
    }
    await expectError("forged token: getBytes → 401", fb.getBytes(fb.ref(forged, path)), "storage/unauthenticated");
    await expectError("forged token: uploadBytes → 401", fb.uploadBytes(fb.ref(forged, path), bytes), "storage/unauthenticated");
    await expectError("forged token: resumable → 401", fb.uploadBytesResumable(fb.ref(forged, "users/alice/f.bin"), big), "storage/unauthenticated");
    check("after refusals: bytes unchanged", Buffer.from(await fb.getBytes(fb.ref(alice, path))).equals(bytes), true);
    check("bob writes his own", (await fb.uploadBytes(fb.ref(bob, "users/bob/x.bin"), bytes)).metadata.size, bytes.length);
    check("owner lists", (await fb.listAll(fb.ref(alice, "users/alice"))).items.map((i) => i.fullPath), ["users/alice/big.bin", "users/alice/private.bin"]);
  },
};

(async () => {
  const name = process.argv[2];
  if (!scenarios[name]) throw new Error(`unknown scenario ${name}`);
  await scenarios[name]();
})()
  .catch((e) => {
    // A StorageError carries the HTTP status and the server's answer: the first thing to read.
    const server = e.customData && e.customData.serverResponse ? ` status=${e.status} server=${e.customData.serverResponse}` : "";
    failures.push({ label: "uncaught", actual: `${e.code || ""}${server} ${e.stack || e}`.slice(0, 2000), expected: "no exception" });
  })
  .finally(() => {
    process.stdout.write(JSON.stringify({ scenario: process.argv[2], checks, failures }) + "\n");
    process.exit(0);
  });
