"""Mixed load: N clients for T seconds doing every kind of request while `larder gc --grace 0s` runs
in a loop. Each client owns the prefix `c{i}/` (its uploads, PATCHes and deletes), and everyone reads
the never-changed `shared/` objects, so every answer is known exactly: a 404 is only expected for a
name its own client deleted. Uploads draw from a small pool of contents, so dedupe races the
collector. Reports requests, errors by kind, p50/p99 per kind, peak RSS, descriptors before/after.
"""
import base64
import random
import threading
import time

import requests

from .harness import (BUCKET, Result, Tally, fd_count, fd_kinds, gc, pid_status, quote, settled_fd_kinds, sha256,
                      start_server, verify)

KiB = 1024
TUS = {"Tus-Resumable": "1.0.0"}
POOL = [random.Random(k).randbytes(size) for k, size in enumerate([0, 1, 700, 4 * KiB, 33 * KiB, 128 * KiB,
                                                                    256 * KiB, 600 * KiB])]
SHARED = {f"shared/{k}": random.Random(100 + k).randbytes(size)
          for k, size in enumerate([1, 10, 1000, 4 * KiB, 64 * KiB, 200 * KiB, 1024 * KiB, 3 * 1024 * KiB])}
WEIGHTS = {"download": 22, "range": 14, "metadata": 14, "list": 8, "upload": 14, "tus": 5, "patch": 10,
           "delete": 8, "head": 5}


class Client:
    def __init__(self, index, url, tally, rng):
        self.index = index
        self.url = url
        self.tally = tally
        self.rng = rng
        self.session = requests.Session()
        self.owned = {}  # name -> bytes
        self.n = 0

    def obj(self, name):
        return f"{self.url}/v0/b/{BUCKET}/o/{quote(name)}"

    def timed(self, kind, fn):
        started = time.monotonic()
        try:
            problem = fn()
        except requests.RequestException as e:
            problem = ("exception " + type(e).__name__, str(e))
        except (ValueError, KeyError) as e:
            problem = ("bad answer " + type(e).__name__, str(e))
        if problem:
            self.tally.error(kind, *problem)
        else:
            self.tally.ok(kind, time.monotonic() - started)

    def readable(self):
        """A name and its bytes: shared, or one of ours."""
        if self.owned and self.rng.random() < 0.4:
            name = self.rng.choice(sorted(self.owned))
            return name, self.owned[name]
        name = self.rng.choice(sorted(SHARED))
        return name, SHARED[name]

    def download(self):
        name, body = self.readable()
        r = self.session.get(self.obj(name) + "?alt=media", timeout=60)
        if r.status_code != 200:
            return f"status {r.status_code}", f"{name}: {r.text[:200]}"
        if r.content != body:
            return "wrong bytes", name

    def range(self):
        name = self.rng.choice([n for n, b in SHARED.items() if len(b) > 1])
        body = SHARED[name]
        start = self.rng.randrange(len(body))
        end = self.rng.randrange(start, len(body))
        r = self.session.get(self.obj(name) + "?alt=media", headers={"Range": f"bytes={start}-{end}"}, timeout=60)
        if r.status_code != 206:
            return f"status {r.status_code}", f"{name} {start}-{end}: {r.text[:200]}"
        if r.content != body[start:end + 1] or r.headers.get("Content-Range") != f"bytes {start}-{end}/{len(body)}":
            return "wrong range", f"{name} {start}-{end} {r.headers.get('Content-Range')}"

    def metadata(self):
        name, body = self.readable()
        r = self.session.get(self.obj(name), timeout=30)
        if r.status_code != 200:
            return f"status {r.status_code}", f"{name}: {r.text[:200]}"
        meta = r.json()
        if meta["sha256"] != sha256(body) or meta["size"] != str(len(body)) or meta["name"] != name:
            return "wrong metadata", f"{name}: {meta}"

    def head(self):
        name, body = self.readable()
        r = self.session.head(self.obj(name) + "?alt=media", timeout=30)
        if r.status_code != 200:
            return f"status {r.status_code}", name
        if r.headers.get("Content-Length") != str(len(body)) or r.headers.get("ETag") != f'"{sha256(body)}"':
            return "wrong headers", f"{name}: {dict(r.headers)}"

    def list(self):
        prefix = f"c{self.index}/"
        r = self.session.get(f"{self.url}/v0/b/{BUCKET}/o?prefix={quote(prefix)}", timeout=30)
        if r.status_code != 200:
            return f"status {r.status_code}", r.text[:200]
        names = sorted(item["name"] for item in r.json().get("items", []))
        if names != sorted(self.owned):
            return "wrong list", f"{prefix}: got {names}, hold {sorted(self.owned)}"

    def new_name(self):
        self.n += 1
        return f"c{self.index}/o{self.n}"

    def upload(self):
        if len(self.owned) >= 12:
            return self.delete()
        name, body = self.new_name(), self.rng.choice(POOL)
        r = self.session.post(f"{self.url}/v0/b/{BUCKET}/o?name={quote(name)}", data=body, timeout=60)
        if r.status_code != 200:
            return f"status {r.status_code}", f"{name}: {r.text[:200]}"
        if r.json()["sha256"] != sha256(body):
            return "wrong sha256", name
        self.owned[name] = body

    def tus(self):
        if len(self.owned) >= 12:
            return self.delete()
        name, body = self.new_name(), self.rng.choice(POOL)
        meta = "name " + base64.b64encode(name.encode()).decode()
        first = body[:len(body) // 2]
        r = self.session.post(f"{self.url}/v0/b/{BUCKET}/uploads", data=first, timeout=60, headers={
            **TUS, "Upload-Length": str(len(body)), "Upload-Metadata": meta,
            "Content-Type": "application/offset+octet-stream"})
        if r.status_code != 201 or r.headers.get("Upload-Offset") != str(len(first)):
            return f"create status {r.status_code}", f"{name}: {r.headers.get('Upload-Offset')} {r.text[:200]}"
        if len(first) < len(body):
            r = self.session.patch(self.url + r.headers["Location"], data=body[len(first):], timeout=60, headers={
                **TUS, "Content-Type": "application/offset+octet-stream", "Upload-Offset": str(len(first))})
            if r.status_code != 204 or r.headers.get("Upload-Offset") != str(len(body)):
                return f"patch status {r.status_code}", f"{name}: {r.text[:200]}"
        self.owned[name] = body

    def patch(self):
        if not self.owned:
            return self.upload()
        name = self.rng.choice(sorted(self.owned))
        self.n += 1
        change = {"contentType": f"text/x-k{self.n}", "cacheControl": "max-age=60",
                  "metadata": {"round": str(self.n)}}
        r = self.session.patch(self.obj(name), json=change, timeout=30)
        if r.status_code != 200:
            return f"status {r.status_code}", f"{name}: {r.text[:200]}"
        meta = r.json()
        if (meta["contentType"], meta.get("cacheControl"), meta.get("metadata")) != \
                (change["contentType"], "max-age=60", change["metadata"]):
            return "wrong metadata", f"{name}: {meta}"

    def delete(self):
        if not self.owned:
            return self.upload()
        name = self.rng.choice(sorted(self.owned))
        r = self.session.delete(self.obj(name), timeout=30)
        if r.status_code != 204:
            return f"status {r.status_code}", f"{name}: {r.text[:200]}"
        del self.owned[name]
        r = self.session.get(self.obj(name), timeout=30)
        if r.status_code != 404:
            return f"after delete, status {r.status_code}", name

    def loop(self, stop):
        kinds = list(WEIGHTS)
        weights = [WEIGHTS[k] for k in kinds]
        while not stop.is_set():
            kind = self.rng.choices(kinds, weights)[0]
            self.timed(kind, getattr(self, kind))
        self.session.close()


def collector(data_dir, stop, stats):
    while not stop.is_set():
        code, report, err = gc(data_dir)
        stats["gc runs"] += 1
        if code != 0:
            stats["gc failures"].append(f"exit {code}: {err[:200]}")
        elif report:
            stats["blobs collected"] += report.get("blobsRemoved", 0)
        stop.wait(0.5)


def run(data_dir, clients=20, seconds=8, seed=2):
    # Every client comes from 127.0.0.1, as they would through a reverse proxy: such a deployment
    # lifts the per-address limit (default 64), and so does this scenario.
    server = start_server(data_dir, extra=["--per-ip-connection-limit", "0"])
    pid = server.proc.pid
    failures = []
    with requests.Session() as s:
        for name, body in SHARED.items():
            r = s.post(f"{server.url}/v0/b/{BUCKET}/o?name={quote(name)}", data=body, timeout=60)
            assert r.status_code == 200, r.text
        s.get(server.url + "/healthz", timeout=10)
    time.sleep(0.3)
    fds_before, kinds_before, rss_before = fd_count(pid), fd_kinds(pid), pid_status(pid, "VmRSS")
    tally = Tally()
    rng = random.Random(seed)
    population = [Client(i, server.url, tally, random.Random(rng.random())) for i in range(clients)]
    stop = threading.Event()
    gc_stats = {"gc runs": 0, "gc failures": [], "blobs collected": 0}
    threads = [threading.Thread(target=c.loop, args=(stop,)) for c in population]
    threads.append(threading.Thread(target=collector, args=(data_dir, stop, gc_stats)))
    started = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    elapsed = time.monotonic() - started
    kinds_after = settled_fd_kinds(pid, kinds_before)
    fds_after, peak_rss = fd_count(pid), pid_status(pid, "VmHWM")

    # Nothing lost: the bucket holds exactly shared/ plus what each client holds, with those bytes.
    expected = dict(SHARED)
    for c in population:
        expected.update(c.owned)
    lost, wrong = [], []
    with requests.Session() as s:
        listed, token = [], None
        while True:
            r = s.get(f"{server.url}/v0/b/{BUCKET}/o", params={"maxResults": 1000, **({"pageToken": token} if token else {})},
                      timeout=60)
            listed += [item["name"] for item in r.json().get("items", [])]
            token = r.json().get("nextPageToken")
            if not token:
                break
        for name, body in sorted(expected.items()):
            r = s.get(f"{server.url}/v0/b/{BUCKET}/o/{quote(name)}?alt=media", timeout=60)
            if r.status_code == 404:
                lost.append(name)
            elif r.content != body:
                wrong.append(name)
    extra = sorted(set(listed) - set(expected))
    server.stop()
    ok, verify_code, kinds, _ = verify(data_dir)

    if tally.error_count:
        failures.append(f"{tally.error_count} errors: " + "; ".join(
            f"{k} ×{v} (e.g. {tally.examples[k]})" for k, v in sorted(tally.errors.items())[:8]))
    failures += [f"lost: {n}" for n in lost[:10]] + [f"wrong bytes: {n}" for n in wrong[:10]]
    failures += [f"listed but never kept: {n}" for n in extra[:10]]
    failures += gc_stats["gc failures"][:5]
    # Sockets and data files must all be closed again; the catalog's reader pool may have grown.
    if kinds_after is None or any(kinds_after[k] > kinds_before[k] for k in ("socket", "data", "other")) \
            or kinds_after["catalog"] > kinds_before["catalog"] + 40:
        failures.append(f"descriptors {kinds_before} before, {kinds_after} after")
    if not ok:
        failures.append(f"verify exited {verify_code}: {kinds}")
    figures = {"clients": clients, "seconds": round(elapsed, 1), "requests": tally.requests,
               "requests/s": round(tally.requests / elapsed), "errors": tally.error_count,
               "errors by kind": dict(tally.errors) or "none", "lost": len(lost), "wrong bytes": len(wrong),
               "objects at end": len(expected),
               "gc runs": gc_stats["gc runs"], "blobs collected meanwhile": gc_stats["blobs collected"],
               "RSS before (MB)": _mb(rss_before), "peak RSS VmHWM (MB)": _mb(peak_rss),
               "FDs before/after": f"{fds_before}/{fds_after} ({kinds_before} / {kinds_after})",
               "verify": f"exit {verify_code}, findings {kinds or 'none'}",
               "latency ms (count, p50, p99)": {k: (n, round(p50, 1), round(p99, 1))
                                                for k, (n, p50, p99) in tally.percentiles().items()}}
    return Result("Mixed load", not failures, figures, failures)


def _mb(value):
    return None if value is None else round(value / 1e6, 1)
